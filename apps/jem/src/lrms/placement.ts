// Placement rules live in @ce/mapping so that `ceadm explain` decides with the very same code.
export { type Placement, jobIdentity, placementFor } from "@ce/mapping";
