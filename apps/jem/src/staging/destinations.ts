// The destination policy lives in @ce/mapping so that `ceadm explain` refuses a URL with the very same code.
export { DestinationRefused, type DestinationPolicy, destinationPolicy, parseCidr } from "@ce/mapping";
