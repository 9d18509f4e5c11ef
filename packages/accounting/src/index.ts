export * from "./record.js";
export * from "./db/index.js";
export * from "./consumer.js";
export * from "./apel/messages.js";
export * from "./apel/sign.js";
export * from "./apel/argo.js";
export * from "./apel/publish.js";
