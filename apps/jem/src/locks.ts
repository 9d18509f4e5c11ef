// The leases live in the store (their keys and Lua scripts have one owner); re-exported for the JEM.
export { Locks, type Lease } from "@ce/store";
