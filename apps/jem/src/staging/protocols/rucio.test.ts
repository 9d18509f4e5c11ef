import { describe, expect, it } from "vitest";
import { parseListing } from "./rucio.js";

describe("Rucio replica listings", () => {
  const line = (o: object) => `${JSON.stringify(o)}\n`;

  it("orders PFNs by transferprotocol, then Rucio's priority; skips tape, local and unknown schemes", () => {
    const text = line({
      scope: "mc23",
      name: "f.root",
      bytes: 10,
      adler32: "0A0B0C0D",
      md5: null,
      pfns: {
        "root://a.example/f.root": { rse: "A", type: "DISK", priority: 1 },
        "davs://b.example/f.root": { rse: "B", type: "DISK", priority: 3 },
        "https://c.example/f.root": { rse: "C", type: "DISK", priority: 2 },
        "davs://tape.example/f.root": { rse: "T", type: "TAPE", priority: 0 },
        "file:///etc/passwd": { rse: "L", type: "DISK", priority: 0 },
        "srm://d.example/f.root": { rse: "D", type: "DISK", priority: 0 },
      },
    });
    expect(parseListing(text, "mc23", "f.root")).toEqual({
      scope: "mc23",
      name: "f.root",
      size: 10,
      checksum: "adler32:0a0b0c0d",
      replicas: ["root://a.example/f.root", "https://c.example/f.root", "davs://b.example/f.root"],
    });
    expect(parseListing(text, "mc23", "f.root", "root,https")!.replicas).toEqual([
      "root://a.example/f.root",
      "https://c.example/f.root",
      "davs://b.example/f.root",
    ]);
    expect(parseListing(text, "mc23", "f.root", "https")!.replicas).toEqual(["https://c.example/f.root", "davs://b.example/f.root"]);
  });

  it("reads the older `rses` form, md5 when there is no adler32, and only the DID asked for", () => {
    const text =
      line({ scope: "s", name: "other", rses: { X: ["https://x/other"] } }) +
      line({ scope: "s", name: "f", md5: "ABCDEF", rses: { A: ["https://a/f"], B: ["root://b/f"] } });
    expect(parseListing(text, "s", "f")).toEqual({
      scope: "s",
      name: "f",
      size: undefined,
      checksum: "md5:abcdef",
      replicas: ["https://a/f", "root://b/f"],
    });
    expect(parseListing("", "s", "f")).toBeUndefined();
  });
});
