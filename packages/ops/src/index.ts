export * from "./metrics.js";
export * from "./auth.js";
export * from "./ops.js";
export * from "./admin-app.js";
export * from "./logger.js";
export * from "./health-metrics.js";
export * from "./vos.js";
