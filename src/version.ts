import pkg from "../package.json";

/** The inferd version; `build/build.ts` stamps the commit in through `INFERD_BUILD_STAMP` at compile time. */
export const VERSION: string = pkg.version + (process.env.INFERD_BUILD_STAMP ?? "");
