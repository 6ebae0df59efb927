import { expect, test } from "vitest";
import { ByteBudget } from "./byte-budget.ts";

const settled = async (promise: Promise<unknown>) => {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
};

test("takes what fits at once; the rest waits in order, a large head not passed by a smaller one", async () => {
  const budget = new ByteBudget(10);
  const first = await budget.take(6);
  const large = budget.take(6);
  const small = budget.take(1);
  expect(await settled(large)).toBe(false);
  expect(await settled(small)).toBe(false);
  expect(budget.queued).toBe(2);
  first();
  first(); // given back once only
  const giveLarge = await large;
  const giveSmall = await small;
  expect(budget.inUse).toBe(7);
  giveLarge();
  giveSmall();
  expect(budget.inUse).toBe(0);
});

test("more than the whole budget takes the whole of it; a waiter whose client left is dropped", async () => {
  const budget = new ByteBudget(10);
  const all = await budget.take(50);
  expect(budget.inUse).toBe(10);
  const gone = new AbortController();
  const left = budget.take(1, gone.signal);
  const next = budget.take(1);
  gone.abort(new Error("client left"));
  await expect(left).rejects.toThrow("client left");
  all();
  (await next)();
  expect(budget.inUse).toBe(0);
  expect(budget.queued).toBe(0);
});
