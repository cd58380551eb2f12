// The finding codes the tab acts on (the package's codes: tests/test_frontend_codes.py pins each to
// one the rules give, and keeps every other module from spelling a code itself).
export const WORSE_THAN_BASELINE = "worse_than_baseline";
export const PART_NOT_RECORDED = "part_not_recorded";
