export * from "./schema.js";
export * from "./load.js";
export * from "./mapping.js";
