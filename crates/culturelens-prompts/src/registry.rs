//! The registry: the one table of every upstream file the prompt sets are built from (repository,
//! pinned commit, path, mirror path, sha256) and of each set's licence. Nothing else in the crate
//! names a commit, a hash or a licence.

use std::fmt;

/// Where raw files are downloaded from unless `CULTURELENS_DATA_BASE_URL` says otherwise (the
/// browser app fetches from it too).
pub const DEFAULT_BASE_URL: &str = "https://raw.githubusercontent.com";

/// A public repository pinned at one commit.
#[derive(Debug)]
pub struct Upstream {
    pub owner: &'static str,
    pub repo: &'static str,
    pub commit: &'static str,
}

/// One upstream file: where it lives upstream, where it lives in a mirror or the cache, and the
/// sha256 its bytes must have.
#[derive(Debug)]
pub struct UpstreamFile {
    pub upstream: &'static Upstream,
    /// Path inside the repository at [`Upstream::commit`].
    pub path: &'static str,
    /// Path relative to a mirror folder or the download cache (the layout of
    /// `shared/data/upstream`).
    pub mirror_path: &'static str,
    /// Lower-case hex sha256 of the file's bytes.
    pub sha256: &'static str,
}

impl UpstreamFile {
    /// `<base>/<owner>/<repo>/<commit>/<path>`, each path segment percent-encoded (the MAGBIG
    /// folder `indirect:gender_neutral` becomes `indirect%3Agender_neutral`).
    pub fn url(&self, base_url: &str) -> String {
        let u = self.upstream;
        let path: Vec<String> = self.path.split('/').map(percent_encode).collect();
        format!("{}/{}/{}/{}/{}", base_url.trim_end_matches('/'), u.owner, u.repo, u.commit, path.join("/"))
    }

    /// Accepts bytes whose lower-case hex sha256 is `actual` only if it is the pinned one; else the
    /// error names the file, where it came from (`origin`) and both hashes, then `hint`.
    pub fn verify(&self, actual: &str, origin: &str, hint: &'static str) -> Result<(), crate::PromptError> {
        if actual == self.sha256 {
            Ok(())
        } else {
            Err(crate::PromptError::Checksum {
                file: self.mirror_path.to_string(),
                origin: origin.to_string(),
                expected: self.sha256.to_string(),
                actual: actual.to_string(),
                hint,
            })
        }
    }
}

/// Percent-encodes every byte outside RFC 3986's unreserved set.
fn percent_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The four prompt sets, by their CLI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptSet {
    Sos,
    Magbig,
    Cube,
    Cultext2i,
}

impl PromptSet {
    pub const ALL: [PromptSet; 4] =
        [PromptSet::Sos, PromptSet::Magbig, PromptSet::Cube, PromptSet::Cultext2i];

    /// The CLI name (`sos`, `magbig`, `cube`, `cultext2i`), also the value of the `set` column.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Parses a CLI name.
    pub fn parse(name: &str) -> Option<PromptSet> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The set named `name`; an unknown name is refused, listing the sets (`prompts export SET`,
    /// `generate --prompt-set`, the Python package's `prompts.load`).
    pub fn from_name(name: &str) -> Result<PromptSet, String> {
        Self::parse(name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|s| s.name()).collect();
            format!("unknown prompt set {name:?} (expected one of {})", names.join(", "))
        })
    }

    pub fn info(self) -> &'static SetInfo {
        match self {
            PromptSet::Sos => &SOS,
            PromptSet::Magbig => &MAGBIG,
            PromptSet::Cube => &CUBE,
            PromptSet::Cultext2i => &CULTEXT2I,
        }
    }
}

impl fmt::Display for PromptSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a user needs to know about a set before using it.
#[derive(Debug)]
pub struct SetInfo {
    pub name: &'static str,
    pub title: &'static str,
    pub paper: &'static str,
    /// The licence terms of the prompt data, shown on first use.
    pub licence: &'static str,
    /// The upstream files the set is parsed from (empty for CulText2I, typed in from the paper).
    pub files: &'static [UpstreamFile],
}

pub static SOS_REPO: Upstream = Upstream {
    owner: "TAI-HAMBURG",
    repo: "Surface-Over-Semantics",
    commit: "24fb4c3b0a74f66dcd3c00e6333c91d1987cf8de",
};

pub static CUBE_REPO: Upstream =
    Upstream { owner: "google-deepmind", repo: "cube", commit: "4ec2d350102dcfc03e41aa51ee0f2398d642a1a6" };

pub static MAGBIG_REPO: Upstream =
    Upstream { owner: "felifri", repo: "MAGBIG", commit: "dce31d9e62d124f243d012c445a5dfbbb993b975" };

pub static SOS_FILES: [UpstreamFile; 1] = [UpstreamFile {
    upstream: &SOS_REPO,
    path: "data/full_dataset.csv",
    mirror_path: "Surface-Over-Semantics/full_dataset.csv",
    sha256: "6cc0e2f50a69d5e3589877ae82cf9ee681b227f4bcf9de4d45638e3cca93a376",
}];

pub static CUBE_FILES: [UpstreamFile; 1] = [UpstreamFile {
    upstream: &CUBE_REPO,
    path: "dataset/cube_1k.json",
    mirror_path: "cube/cube_1k.json",
    sha256: "bdb5b477bb75f54112d44a540b064ae6cbb5600e3b719c47a645b459b140db76",
}];

/// A MAGBIG prompt file: `prompts/<name>` upstream, `MAGBIG/prompts/<name>` in a mirror.
const fn magbig(path: &'static str, mirror_path: &'static str, sha256: &'static str) -> UpstreamFile {
    UpstreamFile { upstream: &MAGBIG_REPO, path, mirror_path, sha256 }
}

pub static MAGBIG_FILES: [UpstreamFile; 31] = [
    magbig(
        "prompts/adj_arabic.csv",
        "MAGBIG/prompts/adj_arabic.csv",
        "8d690b540228c4bb885b8d9fbd7bfb2f7c78de5e94276d2475838fd21d923851",
    ),
    magbig(
        "prompts/adj_chinese.csv",
        "MAGBIG/prompts/adj_chinese.csv",
        "5e3c21ed366f9213ba875972b6ae01e58888c3eb6f7124bf5ae2100ae379eb0d",
    ),
    magbig(
        "prompts/adj_english.csv",
        "MAGBIG/prompts/adj_english.csv",
        "60abdb9bc2ba28357ef59e4005bd0a3e589cc6cb4e507d23fb2c8ab62df5de79",
    ),
    magbig(
        "prompts/adj_french.csv",
        "MAGBIG/prompts/adj_french.csv",
        "ef0ac8a2e95ecc8fa11d85a639a8d86f858ab41470b135e9462f7cd7e4afd16a",
    ),
    magbig(
        "prompts/adj_german.csv",
        "MAGBIG/prompts/adj_german.csv",
        "33d8f650002b8e7ac6ef41638870df1031728fa047099c11f0da43c7b4b1b85e",
    ),
    magbig(
        "prompts/adj_italian.csv",
        "MAGBIG/prompts/adj_italian.csv",
        "106439b57bab934c39407b4bd2ea714e848cf951c255713fef351e10d1360aa1",
    ),
    magbig(
        "prompts/adj_japanese.csv",
        "MAGBIG/prompts/adj_japanese.csv",
        "1ef2a9603df9fd22f977c2216978276da901aa76e0693a4835dba239c5a12355",
    ),
    magbig(
        "prompts/adj_korean.csv",
        "MAGBIG/prompts/adj_korean.csv",
        "594503ee34a67d113c2f0b1dcfb7f38cfdb16f3856460f9cab33e05e3a800bbb",
    ),
    magbig(
        "prompts/adj_russian.csv",
        "MAGBIG/prompts/adj_russian.csv",
        "7b3c20955e9bae3a25b56b56d0d4653da5394e7ebd77c0c60cfe209451c5c431",
    ),
    magbig(
        "prompts/adj_spanish.csv",
        "MAGBIG/prompts/adj_spanish.csv",
        "87966c03e8c9f6d6cb4713fb709f625a35be5f1e27da3e52aea949fdff7728cf",
    ),
    magbig(
        "prompts/occ_arabic.csv",
        "MAGBIG/prompts/occ_arabic.csv",
        "fa52cc2dfb6bb5ccd629bd818f1a7648d2bb054a757999343d9760b1d4dbd9e5",
    ),
    magbig(
        "prompts/occ_chinese.csv",
        "MAGBIG/prompts/occ_chinese.csv",
        "e8275d34d35f2a64d57730201dc43a6d11c060a6931d775c4baed11e7338a04d",
    ),
    magbig(
        "prompts/occ_english.csv",
        "MAGBIG/prompts/occ_english.csv",
        "d6d196cad992586dfeeb1456a1db71d7d87ccc620be62170a25cc80378c1b0b3",
    ),
    magbig(
        "prompts/occ_french.csv",
        "MAGBIG/prompts/occ_french.csv",
        "3031969bb2960bb0a1889c9cea13f4f907b3d57d0dc8122539d945b2faa4813e",
    ),
    magbig(
        "prompts/occ_german.csv",
        "MAGBIG/prompts/occ_german.csv",
        "d91ba2f529ff8805a9fd6ea27be8b609b7a947c3546d761a0c2ae2e85b83635d",
    ),
    magbig(
        "prompts/occ_italian.csv",
        "MAGBIG/prompts/occ_italian.csv",
        "79b794842684f0202e4075e42a99b31bc5f6c617665cb661a535bd84c13fbb40",
    ),
    magbig(
        "prompts/occ_japanese.csv",
        "MAGBIG/prompts/occ_japanese.csv",
        "0e5da0653e66088fdab7fcf72d79de3a485ccc427964256ed36e42f90118c4a5",
    ),
    magbig(
        "prompts/occ_korean.csv",
        "MAGBIG/prompts/occ_korean.csv",
        "9444b339e6d10374fc4d7259544c052583f23b751a804646efc19a06c89178da",
    ),
    magbig(
        "prompts/occ_russian.csv",
        "MAGBIG/prompts/occ_russian.csv",
        "36b048fcd434288ef26d4f60d9717e40e21461be264944da7d165b3123f3c3b4",
    ),
    magbig(
        "prompts/occ_spanish.csv",
        "MAGBIG/prompts/occ_spanish.csv",
        "cb70222f5be03227725ae5764e3d4c515baf63cf843d0291ca6dba538ece58e1",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_arabic.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_arabic.csv",
        "4bde043801b03d8d73567eb565c7943779a062ad9e42e034f81bc37c8f5cee73",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_chinese.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_chinese.csv",
        "c7421389f04bf6f43dc4194b50432696aadf32ce1aa680fcfad962fdb74b0e0c",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_english.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_english.csv",
        "7019722ac84a1502afad4d99eb0f4b0af5e1bd3dfd8544b15d3c4c4cf5e85f74",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_french.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_french.csv",
        "3122ece2d41ee60bce90536556a5b85879ff030c79f23bca9846d69177f17dea",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_german.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_german.csv",
        "00d77c751df74d68e95be2faa0b43a0ad89e9aaca18f30a3f49283ec5a513889",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_german_star.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_german_star.csv",
        "296a3a351604c6c0ef6e31878535ec238af94134651a9115861d7f86e09860af",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_italian.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_italian.csv",
        "8166117c5b38a3e4781bc738c9e343ddea983e1ccf517c3bb05fbabe8d8f17fb",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_japanese.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_japanese.csv",
        "6be6dca5867bbcb7dec862a76f3d29c0dc9bb2746dd77e37d4131b100da57aee",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_korean.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_korean.csv",
        "b0e9dffe72aafafe4d100c59600bc1b2a814d4dc8c0a38209b79c36cfe87d674",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_russian.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_russian.csv",
        "cdaee6645a0b22672ee1f751619b0e1dda6bac98ff90ebe5eee72be619000734",
    ),
    magbig(
        "prompts/indirect:gender_neutral/occ_spanish.csv",
        "MAGBIG/prompts/indirect:gender_neutral/occ_spanish.csv",
        "1ab1c4196e8690d5f4d93eebf433fc67940431b30304cf8cd766af590ac5a08a",
    ),
];

pub static SOS: SetInfo = SetInfo {
    name: "sos",
    title: "SoS: Surface-over-Semantics multilingual culture prompts",
    paper: "Holtermann, Schneider & Lauscher, SoS: Analysis of Surface-over-Semantics in Multilingual \
            Text-To-Image Generation (dataset: Sec. 3, Table 1)",
    licence: "The SoS prompt CSV carries no licence: the upstream repository has no LICENSE file and its \
              README's licence section is truncated. Treat the data as all rights reserved by its \
              authors until they clarify; use it for research and do not redistribute it.",
    files: &SOS_FILES,
};

pub static MAGBIG: SetInfo = SetInfo {
    name: "magbig",
    title: "MAGBIG: Multilingual Assessment of Gender Bias in Image Generation",
    paper: "Friedrich et al., Multilingual Text-to-Image Generation Magnifies Gender Stereotypes \
            (prompts: Sec. 3, App. K)",
    licence: "The MAGBIG GitHub repository has no LICENSE file; the authors publish the same prompts \
              on the Hugging Face dataset felfri/MAGBIG under Apache-2.0.",
    files: &MAGBIG_FILES,
};

pub static CUBE: SetInfo = SetInfo {
    name: "cube",
    title: "CUBE-1K: CUltural BEnchmark for text-to-image models (cultural awareness and diversity)",
    paper: "Kannen et al., Beyond Aesthetics: Cultural Competence in Text-to-Image Models \
            (CUBE-1K: Sec. 3.2, Table 7, Table 13; under-specified prompts: Sec. 5, App. J, K, Fig. 8)",
    licence: "CUBE data is licensed CC BY-NC-SA 4.0 (code Apache-2.0): attribution required, \
              non-commercial use only, share derived data under the same licence.",
    files: &CUBE_FILES,
};

pub static CULTEXT2I: SetInfo = SetInfo {
    name: "cultext2i",
    title: "CulText2I: cultural concepts x prompt templates x languages",
    paper: "Ventura et al., Navigating Cultural Chasms: Exploring and Unlocking the Cultural POV of \
            Text-To-Image Models (templates: Table 1; nationalities: Table 8; concepts: Table 9)",
    licence: "No prompt data is released upstream: the templates, nationalities and concepts are typed \
              in from the paper's Tables 1, 8 and 9 (cite the paper). Translations are yours \
              (--translations).",
    files: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_pinned_and_percent_encoded() {
        assert_eq!(
            SOS_FILES[0].url("https://raw.githubusercontent.com/"),
            "https://raw.githubusercontent.com/TAI-HAMBURG/Surface-Over-Semantics/\
             24fb4c3b0a74f66dcd3c00e6333c91d1987cf8de/data/full_dataset.csv"
        );
        let star = MAGBIG_FILES.iter().find(|f| f.path.ends_with("occ_german_star.csv")).unwrap();
        assert_eq!(
            star.url("http://127.0.0.1:9"),
            "http://127.0.0.1:9/felifri/MAGBIG/dce31d9e62d124f243d012c445a5dfbbb993b975/prompts/\
             indirect%3Agender_neutral/occ_german_star.csv"
        );
    }

    #[test]
    fn every_file_is_listed_once_with_a_well_formed_hash() {
        let all: Vec<&UpstreamFile> = PromptSet::ALL.iter().flat_map(|s| s.info().files).collect();
        assert_eq!(all.len(), 33);
        for (i, f) in all.iter().enumerate() {
            assert_eq!(f.sha256.len(), 64, "{}", f.mirror_path);
            assert!(f.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            assert!(f.mirror_path.ends_with(f.path.rsplit_once('/').unwrap().1));
            assert!(all[..i].iter().all(|g| g.mirror_path != f.mirror_path), "{}", f.mirror_path);
        }
    }

    #[test]
    fn registry_matches_the_shared_mirror_sums() {
        let sums = std::fs::read_to_string(culturelens_testkit::upstream_mirror().join("SHA256SUMS"))
            .expect("../shared/data/upstream/SHA256SUMS must exist (CI provides it)");
        let mut listed = 0;
        for line in sums.lines() {
            let (hash, path) = line.split_once("  ").unwrap();
            let path = path.trim_start_matches("./");
            if path == "SHA256SUMS" {
                continue;
            }
            listed += 1;
            let file = PromptSet::ALL
                .iter()
                .flat_map(|s| s.info().files)
                .find(|f| f.mirror_path == path)
                .unwrap_or_else(|| panic!("{path} of SHA256SUMS is not in the registry"));
            assert_eq!(file.sha256, hash, "{path}");
        }
        assert_eq!(listed, 33);
    }

    #[test]
    fn set_names_round_trip() {
        for s in PromptSet::ALL {
            assert_eq!(PromptSet::parse(s.name()), Some(s));
        }
        assert_eq!(PromptSet::parse("SoS"), None);
    }
}
