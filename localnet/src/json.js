// JSON that keeps 64-bit integers exact. JavaScript numbers lose precision
// above 2^53, but Solana RPC carries u64 values (lamports, rentEpoch) and
// solana-go sends random 63-bit request ids that must be echoed unchanged.

// A string literal (skipped) or an integer literal of 16+ digits that is not
// part of a fraction or exponent.
const LONG_INT = /"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])(-?\d{16,})(?![\d.eE])/g;
const TAG = '\u0000';

function reviveBig(_key, value) {
  if (typeof value === 'string' && value.charCodeAt(0) === 0 && /^\u0000-?\d+$/.test(value)) {
    return BigInt(value.slice(1));
  }
  return value;
}

/** Parses JSON; integers of 16 or more digits become BigInt. Throws SyntaxError. */
export function parseJSON(text) {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let found = false;
  const tagged = text.replace(LONG_INT, (match, digits) => {
    if (digits === undefined) return match;
    found = true;
    return `"\\u0000${digits}"`;
  });
  return found ? JSON.parse(tagged, reviveBig) : JSON.parse(text);
}

function tagBig(_key, value) {
  return typeof value === 'bigint' ? TAG + value.toString() : value;
}

const TAGGED = /"\\u0000(-?\d+)"/g;

/** Serializes like JSON.stringify, writing BigInt values as exact JSON numbers. */
export function stringifyJSON(value) {
  // Most responses hold no BigInt, and a replacer function makes
  // JSON.stringify several times slower: try without one first (it throws a
  // TypeError on BigInt).
  try {
    return JSON.stringify(value);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
  }
  const text = JSON.stringify(value, tagBig);
  return text.includes('\\u0000') ? text.replace(TAGGED, '$1') : text;
}

/**
 * A u64 for a response: a Number when exact, else the BigInt (written
 * exactly, on stringifyJSON's slower path).
 */
export function u64JSON(v) {
  return v <= MAX_SAFE ? Number(v) : v;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
