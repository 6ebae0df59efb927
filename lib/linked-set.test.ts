import { describe, expect, it } from "vitest";
import { LinkedSet } from "./linked-set.ts";

describe("LinkedSet", () => {
  it("keeps entries in the order added and forgets one when its removal is called", () => {
    const set = new LinkedSet<string>();
    const removeA = set.add("a");
    set.add("b");
    const removeC = set.add("c");
    expect([...set]).toEqual(["a", "b", "c"]);
    expect(set.size).toBe(3);
    removeA();
    expect([...set]).toEqual(["b", "c"]);
    removeC();
    expect([...set]).toEqual(["b"]);
    expect(set.size).toBe(1);
    set.add("d");
    expect([...set]).toEqual(["b", "d"]);
  });

  it("takes the same value twice as two entries, each removed on its own, and a removal twice once", () => {
    const set = new LinkedSet<number>();
    const first = set.add(1);
    const second = set.add(1);
    first();
    first();
    expect([...set]).toEqual([1]);
    expect(set.size).toBe(1);
    second();
    expect([...set]).toEqual([]);
    expect(set.size).toBe(0);
    set.add(2);
    expect([...set]).toEqual([2]);
  });

  it("lets a caller walk a snapshot while each entry removes itself (a shutdown ending every forward)", () => {
    const set = new LinkedSet<() => void>();
    const called: number[] = [];
    for (let i = 0; i < 4; i++) {
      const remove = set.add(() => {
        called.push(i);
        remove();
      });
    }
    for (const end of set) end();
    expect(called).toEqual([0, 1, 2, 3]);
    expect(set.size).toBe(0);
    expect([...set]).toEqual([]);
  });

  it("walks the entries as they were when the walk began, whatever is removed or added meanwhile", () => {
    const set = new LinkedSet<string>();
    const removeA = set.add("a");
    const removeB = set.add("b");
    set.add("c");
    const seen: string[] = [];
    for (const value of set) {
      seen.push(value);
      if (value === "a") {
        removeA();
        removeB();
        set.add("d");
      }
    }
    expect(seen).toEqual(["a", "b", "c"]);
    expect([...set]).toEqual(["c", "d"]);
  });
});
