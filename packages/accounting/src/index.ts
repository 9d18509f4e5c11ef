export * from "./record.js";
export * from "./db/index.js";
export * from "./consumer.js";
