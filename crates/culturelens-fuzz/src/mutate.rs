//! The mutator: a seed input changed 1 to 8 times by byte-level edits (bit flips, random bytes,
//! inserted, deleted, duplicated or truncated ranges, boundary integers in both byte orders),
//! text-level edits for the text formats (CSV and JSON punctuation, boundary numbers replacing
//! the digits of a number) and splices with another seed. Everything comes from one
//! `SplitMix64`, so an input is a function of its generator's seed.

use culturelens_rng::SplitMix64;

use crate::{Input, MAX_INPUT};

/// Integers at the edges of the sizes a binary header holds.
const INTERESTING: [u64; 14] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    0x7fff_ffff_ffff_ffff,
    u64::MAX,
    10_000_000_000,
];

/// Tokens that change the structure of a CSV or JSON text.
const TOKENS: [&str; 22] = [
    "\"",
    ",",
    "\n",
    "\r\n",
    "\r",
    "{",
    "}",
    "[",
    "]",
    ":",
    "null",
    "true",
    "\"\":",
    "\u{feff}",
    "\0",
    "é",
    "\u{10ffff}",
    "\\u0000",
    "'",
    "(",
    "{}",
    "[[[[[[[[",
];

/// Numbers that replace the digits of a number in a text.
const NUMBERS: [&str; 10] =
    ["0", "-1", "1", "65535", "4294967296", "18446744073709551616", "1e400", "-0", "9999999999", "0.5"];

/// A mutated copy of one of `seeds` (chosen at random), whose files in `mutable` may change.
pub fn mutate_input(seeds: &[Input], mutable: &[usize], rng: &mut SplitMix64) -> Input {
    let mut input = seeds[rng.below(seeds.len() as u64) as usize].clone();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let file = mutable[rng.below(mutable.len() as u64) as usize];
        let other = &seeds[rng.below(seeds.len() as u64) as usize][file];
        mutate_bytes(&mut input[file], other, rng);
    }
    input
}

fn range(rng: &mut SplitMix64, len: usize) -> (usize, usize) {
    if len == 0 {
        return (0, 0);
    }
    let a = rng.below(len as u64) as usize;
    let max = (len - a).min(if rng.below(4) == 0 { len } else { 16 });
    (a, a + 1 + rng.below(max as u64) as usize)
}

/// One edit of `data`; `other` is a seed file to splice from.
pub fn mutate_bytes(data: &mut Vec<u8>, other: &[u8], rng: &mut SplitMix64) {
    let len = data.len();
    match rng.below(11) {
        0 if len > 0 => {
            let i = rng.below(len as u64) as usize;
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len as u64) as usize;
            data[i] = rng.below(256) as u8;
        }
        2 => {
            let at = rng.below(len as u64 + 1) as usize;
            let n = 1 + rng.below(8) as usize;
            let bytes: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
            data.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let (a, b) = range(rng, len);
            data.drain(a..b);
        }
        4 if len > 0 => {
            let (a, b) = range(rng, len);
            let chunk = data[a..b].to_vec();
            let at = rng.below(len as u64 + 1) as usize;
            let times = if rng.below(8) == 0 { 1 + rng.below(64) as usize } else { 1 };
            for _ in 0..times {
                data.splice(at..at, chunk.iter().copied());
            }
        }
        5 if len > 0 => {
            let v = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
            let width = [1, 2, 4, 8][rng.below(4) as usize];
            let bytes = if rng.below(2) == 0 { v.to_le_bytes() } else { v.to_be_bytes() };
            let bytes = if rng.below(2) == 0 { &bytes[..width] } else { &bytes[8 - width..] };
            let at = rng.below(len as u64) as usize;
            let end = (at + width).min(len);
            data[at..end].copy_from_slice(&bytes[..end - at]);
        }
        6 if len > 0 => data.truncate(rng.below(len as u64) as usize),
        7 => {
            let token = TOKENS[rng.below(TOKENS.len() as u64) as usize].as_bytes();
            let at = rng.below(len as u64 + 1) as usize;
            data.splice(at..at, token.iter().copied());
        }
        8 => replace_number(data, rng),
        9 if !other.is_empty() => {
            let (a, b) = range(rng, other.len());
            let at = rng.below(len as u64 + 1) as usize;
            let cut = (at + rng.below(((len - at) as u64).min(64) + 1) as usize).min(len);
            data.splice(at..cut, other[a..b].iter().copied());
        }
        _ => {
            if len > 0 {
                let i = rng.below(len as u64) as usize;
                data[i] = data[i].wrapping_add(1 + rng.below(4) as u8);
            }
        }
    }
    data.truncate(MAX_INPUT);
}

/// Replaces the digits of one number in a text (a run of ASCII digits) by a boundary number.
fn replace_number(data: &mut Vec<u8>, rng: &mut SplitMix64) {
    let starts: Vec<usize> = (0..data.len())
        .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let a = starts[rng.below(starts.len() as u64) as usize];
    let b = (a..data.len()).find(|&i| !data[i].is_ascii_digit()).unwrap_or(data.len());
    let number = NUMBERS[rng.below(NUMBERS.len() as u64) as usize].as_bytes();
    data.splice(a..b, number.iter().copied());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_a_function_of_the_generator_and_stay_bounded() {
        let seeds: Vec<Input> = vec![vec![b"a,b\n1,2\n".to_vec()], vec![b"{\"rows\": 12}".to_vec()]];
        let run = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..200).map(|_| mutate_input(&seeds, &[0], &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let inputs = run(7);
        assert!(inputs.iter().all(|i| i[0].len() <= MAX_INPUT));
        // Mutation changes inputs (most of them).
        let changed = inputs.iter().filter(|i| !seeds.contains(i)).count();
        assert!(changed > 150, "{changed} of 200 changed");
    }

    #[test]
    fn numbers_are_replaced_whole() {
        let mut rng = SplitMix64::new(1);
        let mut data = b"{\"rows\": 12}".to_vec();
        replace_number(&mut data, &mut rng);
        let text = String::from_utf8(data).unwrap();
        assert!(text.starts_with("{\"rows\": ") && text.ends_with('}') && !text.contains("12"), "{text}");
    }
}
