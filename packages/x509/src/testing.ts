/** Test PKI factory for integration tests: `import { createCA, ... } from "@ce/x509/testing"`. */
export * from "./testing-pki.js";
export * from "./testing-proxy.js";
export * from "./testing-attacks.js";
export * from "./testing-voms.js";
