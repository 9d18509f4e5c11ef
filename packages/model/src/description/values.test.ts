import { describe, expect, it } from "vitest";
import { MINUTE, SECOND, parseBoolean, parseDuration, parseInteger, parseTimestamp, splitUrlOptions } from "./values.js";

describe("parseDuration", () => {
  it("bare numbers use the given unit", () => {
    expect(parseDuration("10", MINUTE)).toBe(600);
    expect(parseDuration("10", SECOND)).toBe(10);
    expect(parseDuration("1h30", SECOND)).toBe(3630);
  });

  it.each([
    ["PT1H30M", 5400],
    ["pt45s", 45],
    ["P1W", 604800],
    ["P1Y", 365 * 86400],
    ["P1M", 30 * 86400],
    ["PT0.5M", 30],
    ["2d 3h", 183600],
    ["1H30M", 5400],
    ["  15 m ", 900],
    // ARC's Period: a unit is named by its first letter, words and blanks allowed.
    ["2 minutes", 120],
    ["1 hour 30 minutes", 5400],
    ["1h30m", 5400],
    ["1 Week 2 DAYS", 9 * 86400],
    ["45 sec", 45],
    ["1h30", 5400],
  ])("%j = %i s", (s, v) => {
    expect(parseDuration(s, MINUTE)).toBe(v);
  });

  it.each(["", "P", "PT", "1x", "h", "-5", "1h-2m", "soon", "1 30m", "2 years", "1h,30m", "minutes 2", "1.2.3h"])(
    "%j is not a duration",
    (s) => {
      expect(parseDuration(s, MINUTE)).toBeUndefined();
    },
  );
});

describe("parseTimestamp", () => {
  it.each([
    ["2030-01-02T03:04:05Z", "2030-01-02T03:04:05.000Z"],
    ["2030-01-02T03:04:05", "2030-01-02T03:04:05.000Z"],
    ["2030-01-02 03:04", "2030-01-02T03:04:00.000Z"],
    ["2030-01-02T03:04:05+02:00", "2030-01-02T01:04:05.000Z"],
    ["2030-01-02", "2030-01-02T00:00:00.000Z"],
    ["20300102030405Z", "2030-01-02T03:04:05.000Z"],
  ])("%j", (s, iso) => {
    expect(parseTimestamp(s)?.toISOString()).toBe(iso);
  });

  it.each(["2030-02-30", "20301301000000Z", "yesterday", "2030/01/02"])("%j is rejected", (s) => {
    expect(parseTimestamp(s)).toBeUndefined();
  });
});

describe("small value readers", () => {
  it("booleans and integers", () => {
    expect([parseBoolean("YES"), parseBoolean("false"), parseBoolean("1"), parseBoolean("maybe")]).toEqual([true, false, true, undefined]);
    expect([parseInteger("42"), parseInteger("-3"), parseInteger("4.2"), parseInteger("99999999999999999999")]).toEqual([
      42,
      -3,
      undefined,
      undefined,
    ]);
  });

  it("splits URL options after the host only", () => {
    expect(splitUrlOptions("gsiftp://h:2811;cache=no;threads=2/p;x=y")).toEqual({
      url: "gsiftp://h:2811/p;x=y",
      options: { cache: "no", threads: "2" },
    });
    expect(splitUrlOptions("https://h/p")).toEqual({ url: "https://h/p", options: {} });
    expect(splitUrlOptions("http://h;flag/p")).toBeUndefined();
  });
});
