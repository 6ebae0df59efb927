import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { expect, test } from "vitest";
import { parse } from "yaml";

// The manifests deploy the image hack/build-image.sh builds (the image itself is run by the image
// suite, hack/test-image.sh): config/default maps each Deployment's `image: snooze` to its name:tag.
const root = resolve(import.meta.dirname, "..");
const yaml = (path: string) => parse(readFileSync(resolve(root, path), "utf8"));

test("config/default names the image's tag and every component uses that image", () => {
  const tag = execFileSync(resolve(root, "hack/build-image.sh"), ["--print-tag"], {
    encoding: "utf8",
  }).trim();
  const kustomization = yaml("config/default/kustomization.yaml") as {
    images: { name: string; newName: string; newTag: string }[];
  };
  const [image] = kustomization.images;
  expect(`${image!.newName}:${image!.newTag}`).toBe(tag);
  for (const component of ["activator", "autoscaler", "webhooks"]) {
    const deployment = yaml(`config/${component}/deployment.yaml`) as {
      spec: { template: { spec: { containers: { image: string }[] } } };
    };
    expect(deployment.spec.template.spec.containers.map((c) => c.image)).toEqual([image!.name]);
  }
});
