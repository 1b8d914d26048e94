// CSV helpers shared by the browser tests: the fields of one CSV record (RFC 4180 quoting) and a
// whole file as header + records.
import fs from "node:fs";

/** Splits one CSV record (RFC 4180 quoting, no embedded newlines). */
export function csvFields(line) {
  const out = [];
  let field = "", quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") { out.push(field); field = ""; } else field += c;
  }
  out.push(field);
  return out;
}

/** A CSV file (one record per line) as an array of records, the header first. */
export function csvRecords(file) {
  return fs.readFileSync(file, "utf8").trim().split("\n").map(csvFields);
}
