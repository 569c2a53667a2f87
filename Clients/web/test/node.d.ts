// The few parts of node's API the tests use (Debian's node-typescript ships no @types/node).

declare module "node:test" {
  type Body = () => Promise<void> | void;
  export function test(name: string, body: Body): Promise<void>;
  export function test(name: string, options: { skip?: boolean | string }, body: Body): Promise<void>;
}

declare module "node:assert/strict" {
  interface Assert {
    equal(actual: unknown, expected: unknown, message?: string): void;
    notEqual(actual: unknown, expected: unknown, message?: string): void;
    deepEqual(actual: unknown, expected: unknown, message?: string): void;
    ok(value: unknown, message?: string): asserts value;
    fail(message?: string): never;
    match(value: string, pattern: RegExp, message?: string): void;
    throws(block: () => unknown, error?: RegExp, message?: string): void;
  }
  const assert: Assert;
  export default assert;
}

declare const process: { env: Record<string, string | undefined> };
