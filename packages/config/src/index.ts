export * from "./schema.js";
export * from "./load.js";
export * from "./redis.js";
export * from "./mapping.js";
export * from "./keys.js";
export * from "./startup.js";
export * from "./accounting.js";
