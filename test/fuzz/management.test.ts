// The management properties (management-suite.ts) on one `modelport serve` process.
import { managementSuite } from "./management-suite.js";

managementSuite(false);
