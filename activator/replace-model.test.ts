import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { replaceModel } from "./replace-model.ts";

const replaced = (raw: string, name = "qwen") => replaceModel(Buffer.from(raw), name)?.toString();

describe("replaceModel", () => {
  test("only the top-level member's value changes; nested `model` members and strings that look like one stay", () => {
    expect(
      replaced(
        '{"messages":[{"model":"q","content":"\\"model\\":\\"q\\""}],"model":"q","tools":{"model":"q"}}',
      ),
    ).toBe(
      '{"messages":[{"model":"q","content":"\\"model\\":\\"q\\""}],"model":"qwen","tools":{"model":"q"}}',
    );
  });

  test("the last of several `model` members, as JSON.parse reads it; a name written with escapes counts", () => {
    expect(replaced('{"model":"a","model":"q"}')).toBe('{"model":"a","model":"qwen"}');
    expect(replaced('{"mod\\u0065l":"q"}')).toBe('{"mod\\u0065l":"qwen"}');
  });

  test("a value with escapes and a name that needs them", () => {
    expect(replaced('{"model":"q\\"\\\\","x":1}', 'Qwen/"3"')).toBe('{"model":"Qwen/\\"3\\"","x":1}');
  });

  test("no string `model` at the top: undefined", () => {
    expect(replaced('{"messages":[{"model":"q"}]}')).toBeUndefined();
    expect(replaced('{"model":7}')).toBeUndefined();
  });

  test("for any JSON object with a string model, the result parses to that object with the new name", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue()),
        fc.string(),
        fc.string(),
        (rest, model, name) => {
          const object = { ...rest, model };
          const out = replaceModel(Buffer.from(JSON.stringify(object, null, 1)), name);
          expect(JSON.parse(out!.toString())).toEqual(JSON.parse(JSON.stringify({ ...object, model: name })));
        },
      ),
    );
  });
});
