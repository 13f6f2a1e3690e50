import pkg from "../package.json";

/** The inferd version; `build/build.ts` stamps the commit in with `INFERD_BUILD`. */
export const VERSION: string = pkg.version + (process.env.INFERD_BUILD_STAMP ?? "");
