// The management properties (management-suite.ts) through a `--role api` process in front of a
// `--role runner` process that holds the models (docs/Models-over-time.md#across-tiers).
import { managementSuite } from "./management-suite.js";

managementSuite(true);
