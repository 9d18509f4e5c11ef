export * from "./keys.js";
export * from "./jobs.js";
export * from "./controldir.js";
export * from "./queues.js";
export * from "./secretbox.js";
export * from "./delegations.js";
export * from "./activity.js";
export * from "./quotas.js";
