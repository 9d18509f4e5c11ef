// The real ARC client's whole lifecycle on the slurm back end (the suite: arc-client-suite.ts).
import { arcClientSuite } from "./arc-client-suite.js";

arcClientSuite("slurm");
