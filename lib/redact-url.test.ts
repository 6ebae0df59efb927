import { expect, test } from "vitest";
import { redactUrl } from "./redact-url.ts";

test("a password and the query's values are redacted; where the URL points stays", () => {
  expect(redactUrl("http://user:s3cretPW@127.0.0.1:16523/x?token=QTOKEN&token=2&a")).toBe(
    "http://user:redacted@127.0.0.1:16523/x?token=redacted&a=redacted",
  );
  expect(redactUrl("https://broker.example/ns/default")).toBe("https://broker.example/ns/default");
  expect(redactUrl("not a url")).toBe("not a url");
  // Nothing to hide: as written, not as the URL parser spells it.
  expect(redactUrl("HTTP://Broker.example")).toBe("HTTP://Broker.example");
});
