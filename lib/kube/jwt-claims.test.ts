import { expect, test } from "vitest";
import { audienceClaims } from "./jwt-claims.ts";

const jwt = (payload: string) => `e30.${Buffer.from(payload).toString("base64url")}.c2ln`;

test("aud as a string or a list, exp in seconds; what is not a JWT with a JSON payload is undefined", () => {
  expect(audienceClaims(jwt('{"aud":"a","exp":1700000000}'))).toEqual({
    audiences: ["a"],
    expiresAt: 1_700_000_000_000,
  });
  expect(audienceClaims(jwt('{"aud":["a","b",3]}'))).toEqual({ audiences: ["a", "b"] });
  expect(audienceClaims(jwt("{}"))).toEqual({ audiences: [] });
  for (const token of ["opaque-token", "a.b", jwt("not json"), jwt("null"), "a..c"])
    expect(audienceClaims(token)).toBeUndefined();
});
