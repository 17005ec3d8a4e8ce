// The package's own folder, whatever the working directory: two up from src/common/ or dist/common/.
import { fileURLToPath } from "node:url";

export const PACKAGE_ROOT = fileURLToPath(new URL("../..", import.meta.url));
