//! The scatter's geometry: 2-D PCA coordinates → canvas pixels ([`Transform`], fitted to the
//! point cloud with a margin, one scale for both axes, y up), and box or lasso selection in pixel
//! space. A point is selected when its pixel position lies inside the shape: a box includes its
//! edges; a lasso uses the even-odd rule.

/// Canvas size of the scatter, pixels.
pub const WIDTH: u32 = 820;
pub const HEIGHT: u32 = 560;
/// Empty border around the point cloud, pixels.
pub const MARGIN: f64 = 12.0;

/// Data → canvas pixels, fitted to the point cloud.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transform {
    /// Data coordinates of the canvas centre.
    pub x0: f32,
    pub y0: f32,
    /// Pixels per data unit.
    pub scale: f32,
}

impl Transform {
    /// The transform that centres `coords` (row-major N × 2) and fits them inside the canvas
    /// less [`MARGIN`], keeping the aspect ratio.
    pub fn fit(coords: &[f32]) -> Transform {
        let (mut lo, mut hi) = ([f32::MAX; 2], [f32::MIN; 2]);
        for p in coords.chunks_exact(2) {
            for k in 0..2 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let span = ((hi[0] - lo[0]) / (WIDTH as f32 - 2.0 * MARGIN as f32))
            .max((hi[1] - lo[1]) / (HEIGHT as f32 - 2.0 * MARGIN as f32))
            .max(1e-12);
        Transform { x0: (lo[0] + hi[0]) / 2.0, y0: (lo[1] + hi[1]) / 2.0, scale: 1.0 / span }
    }

    /// Canvas pixel position of the data point `(x, y)`.
    pub fn apply(&self, x: f32, y: f32) -> (f64, f64) {
        (
            f64::from((x - self.x0) * self.scale) + f64::from(WIDTH) / 2.0,
            f64::from(HEIGHT) / 2.0 - f64::from((y - self.y0) * self.scale),
        )
    }
}

/// A selection drawn on the canvas (pixel coordinates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape<'a> {
    /// The box with these two opposite corners (edges included).
    Box((f64, f64), (f64, f64)),
    /// The closed polygon through these points (even-odd rule).
    Lasso(&'a [(f64, f64)]),
}

impl Shape<'_> {
    /// Whether the pixel position `p` is inside.
    pub fn contains(&self, p: (f64, f64)) -> bool {
        match *self {
            Shape::Box(a, b) => {
                p.0 >= a.0.min(b.0) && p.0 <= a.0.max(b.0) && p.1 >= a.1.min(b.1) && p.1 <= a.1.max(b.1)
            }
            Shape::Lasso(poly) => inside_polygon(p, poly),
        }
    }
}

/// Even-odd rule point-in-polygon.
fn inside_polygon(p: (f64, f64), poly: &[(f64, f64)]) -> bool {
    let mut inside = false;
    let mut j = poly.len().saturating_sub(1);
    for i in 0..poly.len() {
        let (a, b) = (poly[i], poly[j]);
        if (a.1 > p.1) != (b.1 > p.1) && p.0 < (b.0 - a.0) * (p.1 - a.1) / (b.1 - a.1) + a.0 {
            inside = !inside;
        }
        j = i;
    }
    inside
}

/// Rows (ascending) of the points of `coords` (row-major N × 2, drawn with `t`) inside `shape`.
pub fn select(coords: &[f32], t: &Transform, shape: Shape<'_>) -> Vec<u32> {
    coords
        .chunks_exact(2)
        .enumerate()
        .filter(|(_, p)| shape.contains(t.apply(p[0], p[1])))
        .map(|(i, _)| i as u32)
        .collect()
}

/// The row of the point of `coords` (drawn with `t`) nearest to the pixel position `p`, if it lies
/// within `radius` pixels (hover hit-testing; the lowest row wins a tie).
pub fn nearest(coords: &[f32], t: &Transform, p: (f64, f64), radius: f64) -> Option<u32> {
    let mut best: Option<(f64, u32)> = None;
    for (i, q) in coords.chunks_exact(2).enumerate() {
        let (x, y) = t.apply(q[0], q[1]);
        let d2 = (x - p.0).powi(2) + (y - p.1).powi(2);
        if d2 <= radius * radius && best.is_none_or(|(b, _)| d2 < b) {
            best = Some((d2, i as u32));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_maps_the_cloud_into_the_canvas_less_the_margin() {
        // x spans 4 units, y 2: x limits the scale ((820 - 24) / 4 = 199 px per unit).
        let coords = [-1.0, 0.0, 3.0, 2.0, 1.0, 1.0];
        let t = Transform::fit(&coords);
        assert_eq!((t.x0, t.y0), (1.0, 1.0));
        assert!((t.scale - 199.0).abs() < 1e-3, "{}", t.scale);
        let (x, y) = t.apply(-1.0, 0.0);
        assert!((x - 12.0).abs() < 1e-3 && (y - (280.0 + 199.0)).abs() < 1e-3, "{x} {y}");
        let (x, y) = t.apply(3.0, 2.0);
        assert!((x - 808.0).abs() < 1e-3 && (y - (280.0 - 199.0)).abs() < 1e-3, "{x} {y}");
        assert_eq!(t.apply(1.0, 1.0), (410.0, 280.0));
    }

    #[test]
    fn a_single_point_sits_in_the_centre() {
        let t = Transform::fit(&[5.0, -2.0]);
        assert_eq!(t.apply(5.0, -2.0), (410.0, 280.0));
    }

    #[test]
    fn box_selects_exactly_the_points_inside_either_corner_order() {
        // x spans 7.96 → scale (820 - 24) / 7.96 = 100; y spans [-1, 2] → centre y0 = 0.5, so a
        // point lands on (410 + 100 x, 280 - 100 (y - 0.5)).
        let coords = [-3.98, 0.0, 3.98, 0.0, 0.0, 0.0, 0.5, 0.5, 1.0, -1.0, 0.2, 2.0];
        let t = Transform::fit(&coords);
        assert!((t.scale - 100.0).abs() < 1e-3);
        let rows = select(&coords, &t, Shape::Box((380.0, 250.0), (470.0, 340.0)));
        // (0, 0) → (410, 330) in; (0.5, 0.5) → (460, 280) in; (1, -1) → (510, 430) out;
        // (0.2, 2) → (430, 130) out; (±3.98, 0) → (12 / 808, 330) out.
        let expected = vec![2, 3];
        assert_eq!(rows, expected);
        assert_eq!(select(&coords, &t, Shape::Box((470.0, 340.0), (380.0, 250.0))), expected);
    }

    #[test]
    fn lasso_uses_the_even_odd_rule() {
        let square = [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)];
        let lasso = Shape::Lasso(&square);
        assert!(lasso.contains((5.0, 5.0)));
        assert!(!lasso.contains((15.0, 5.0)));
        assert!(!lasso.contains((5.0, -1.0)));
        // A bow tie: its two lobes are inside, the crossing's neighbourhood above and below is not.
        let bow = [(0.0, 0.0), (10.0, 10.0), (10.0, 0.0), (0.0, 10.0)];
        assert!(Shape::Lasso(&bow).contains((2.0, 5.0)));
        assert!(!Shape::Lasso(&bow).contains((5.0, 1.0)));
        assert!(!Shape::Lasso(&[]).contains((0.0, 0.0)));
    }

    #[test]
    fn nearest_picks_the_closest_point_within_the_radius() {
        // Same cloud as above: (0, 0) → (410, 330), (0.5, 0.5) → (460, 280), (1, -1) → (510, 430).
        let coords = [-3.98, 0.0, 3.98, 0.0, 0.0, 0.0, 0.5, 0.5, 1.0, -1.0, 0.2, 2.0];
        let t = Transform::fit(&coords);
        assert_eq!(nearest(&coords, &t, (412.0, 331.0), 6.0), Some(2));
        assert_eq!(nearest(&coords, &t, (457.0, 283.0), 6.0), Some(3));
        // 5 px from (410, 330): inside a 5 px radius (edge included), outside 4.9.
        assert_eq!(nearest(&coords, &t, (413.0, 334.0), 5.0), Some(2));
        assert_eq!(nearest(&coords, &t, (413.0, 334.0), 4.9), None);
        // Between two points, a wide radius reaches both: the nearer one wins.
        assert_eq!(nearest(&coords, &t, (430.0, 310.0), 40.0), Some(2));
        assert_eq!(nearest(&coords, &t, (440.0, 300.0), 40.0), Some(3));
        assert_eq!(nearest(&[], &t, (0.0, 0.0), 10.0), None);
    }
}
