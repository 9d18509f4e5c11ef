export * from "./states.js";
export * from "./description/types.js";
