import { expect, test } from "vitest";
import { laxBool } from "./lax-bool.ts";

test("true and false as pydantic reads them in lax mode; anything else is no boolean", () => {
  for (const value of [true, 1, "1", "true", "True", "YES", "y", "t", "on"])
    expect([value, laxBool(value)]).toEqual([value, true]);
  for (const value of [false, 0, "0", "false", "No", "n", "f", "OFF"])
    expect([value, laxBool(value)]).toEqual([value, false]);
  for (const value of [2, 0.5, "", "maybe", " true", null, undefined, [], {}])
    expect([value, laxBool(value)]).toEqual([value, undefined]);
});
