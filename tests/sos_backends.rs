//! The same SoS code on the CPU (`flex`) and wgpu backends must give the same numbers: within
//! [`BOUND`], about 2.5× the largest difference measured on lavapipe (3.9e-7).
//! Without a GPU, wgpu runs on a software Vulkan driver (Debian `mesa-vulkan-drivers`, lavapipe);
//! the test fails, never skips, when no adapter exists.
//!
//! On wgpu, `sos_packed` runs the fused CubeCL kernels; they must equal the tensor graph
//! (`sos_tensor`, the reference) on the same device to [`FUSED_BOUND`], on tables that reach every
//! branch of their plan: row subsets in any order, tables in several blocks, pairs split over
//! several segments, widths below, at and past one cube's units, and more segments than one grid
//! axis holds.

use burn::tensor::{Device, Int, Tensor, TensorData};
use culturelens_compute::sos::{
    CellUnits, GROUP_MEMBERS, Pooling, SEGMENT_ROWS, SosColumns, SosLayout, fused_kernels_on, sos,
    sos_exact_intervals, sos_fast_intervals, sos_packed, sos_tensor, unpack,
};
use culturelens_compute::tensor::id_tensor;
use culturelens_metrics::bootstrap::{CiMethod, CiSpec};
use culturelens_metrics::demo::demo_table;
use culturelens_rng::SplitMix64;
use culturelens_testkit::wgpu;

/// Largest |cpu − wgpu| of a per-image or joint score.
const BOUND: f64 = 1e-6;

/// Largest |fused − graph| of a per-output score, and of a reference norm relative to the norm
/// (issue 15: 1e-5).
const FUSED_BOUND: f32 = 1e-5;

#[test]
fn cpu_and_wgpu_agree_on_the_demo_table() {
    cpu_and_device_agree(&wgpu(), "wgpu");
}

/// The same on wgpu pinned to Vulkan, its kernels compiled to SPIR-V (`--features vulkan`).
#[cfg(feature = "vulkan")]
#[test]
fn cpu_and_vulkan_agree_on_the_demo_table() {
    let vulkan =
        Device::wgpu_options().graphics_api(burn::tensor::wgpu::WgpuBackend::Vulkan).init().unwrap_or_else(
            |e| panic!("no Vulkan adapter ({e}); install a Vulkan driver, e.g. mesa-vulkan-drivers"),
        );
    cpu_and_device_agree(&vulkan, "vulkan");
}

/// Per-image and joint scores of both poolings on the CPU and on `gpu`, within [`BOUND`].
fn cpu_and_device_agree(gpu: &Device, name: &str) {
    let demo = demo_table();
    let cols = SosColumns {
        model: demo.column("model").unwrap(),
        language: demo.column("language").unwrap(),
        culture: demo.column("culture").unwrap(),
        layer: None,
        person: demo.column("person"),
    };
    for pooling in [Pooling::All, Pooling::PerModel] {
        // CPU in cache-sized row blocks, the GPU in one block: same numbers.
        let cpu = sos(demo.embeddings.clone(), demo.dim, cols, pooling, &Device::flex(), Some(100));
        let (_, cpu_values, cpu_report) = cpu.unwrap();
        let (_, gpu_values, gpu_report) =
            sos(demo.embeddings.clone(), demo.dim, cols, pooling, gpu, None).unwrap();
        assert_eq!(cpu_values.per_image.len(), demo.len());
        assert_eq!(gpu_values.per_image.len(), demo.len());
        let max_diff = cpu_values
            .per_image
            .iter()
            .zip(&gpu_values.per_image)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert_eq!(cpu_report.joint.len(), gpu_report.joint.len());
        let mut max_joint = 0.0f64;
        for (a, b) in cpu_report.joint.iter().zip(&gpu_report.joint) {
            assert_eq!((&a.model, &a.language, &a.culture, a.n), (&b.model, &b.language, &b.culture, b.n));
            max_joint = max_joint.max((a.sos - b.sos).abs());
        }
        println!(
            "{pooling:?}: max |cpu - {name}| per image = {max_diff:.3e}, joint = {max_joint:.3e} (bound {BOUND:.0e})"
        );
        assert!(f64::from(max_diff) <= BOUND, "{pooling:?}: per-image max |cpu - {name}| = {max_diff}");
        assert!(max_joint <= BOUND, "{pooling:?}: joint max |cpu - {name}| = {max_joint}");
    }
}

/// The same seed gives the same intervals on the CPU and on wgpu: the same resample indices
/// (drawn on the host), so the bounds differ only by the scores' f32 rounding. Fast mode with BCa,
/// exact mode (SoS on every resample, the fused kernels on wgpu over repeated rows) with
/// percentile bounds.
#[test]
fn intervals_agree_on_cpu_and_wgpu_from_the_same_seed() {
    let demo = demo_table();
    let cols = SosColumns {
        model: demo.column("model").unwrap(),
        language: demo.column("language").unwrap(),
        culture: demo.column("culture").unwrap(),
        layer: None,
        person: None,
    };
    let layout = SosLayout::new(cols, Pooling::All).unwrap();
    let units = CellUnits::outputs(&layout);
    let intervals = |device: &Device| {
        let table =
            Tensor::<2>::from_data(TensorData::new(demo.embeddings.clone(), [demo.len(), demo.dim]), device);
        let scores =
            unpack(sos_packed(std::slice::from_ref(&table), None, &layout, None).into_data(), &layout)
                .unwrap();
        let fast = CiSpec::new(0.95, 500, 3, CiMethod::Bca).unwrap();
        let exact = CiSpec::new(0.95, 20, 3, CiMethod::Percentile).unwrap();
        let f = sos_fast_intervals(&layout, &units, &scores.per_image, fast);
        let e = sos_exact_intervals(&[table], &layout, &units, &scores.per_image, exact, None).unwrap();
        (f, e)
    };
    let (cpu, gpu) = (intervals(&Device::flex()), intervals(&wgpu()));
    let mut worst = 0f64;
    for (a, b) in cpu.0.iter().chain(&cpu.1).zip(gpu.0.iter().chain(&gpu.1)) {
        let (a, b) = (a.unwrap(), b.unwrap());
        worst = worst.max((a.lo - b.lo).abs()).max((a.hi - b.hi).abs());
    }
    println!("intervals: max |cpu - wgpu| of a bound = {worst:.3e} (bound {BOUND:.0e})");
    assert!(worst <= BOUND, "interval bounds differ by {worst}");
}

/// A synthetic SoS table: `n` rows of width `d` drawn from `seed`, with `languages` × `cultures`
/// labels (row `i` gets language `i % languages`, culture `(i / languages) % cultures`) and two
/// models; every row has a language and a culture direction plus noise.
struct Synthetic {
    x: Vec<f32>,
    d: usize,
    model: Vec<String>,
    language: Vec<String>,
    culture: Vec<String>,
}

impl Synthetic {
    fn new(n: usize, d: usize, languages: usize, cultures: usize, seed: u64) -> Synthetic {
        let mut rng = SplitMix64::new(seed);
        let mut direction = |count: usize| -> Vec<Vec<f32>> {
            (0..count).map(|_| (0..d).map(|_| rng.normal() as f32).collect()).collect()
        };
        let (lang_dir, cult_dir) = (direction(languages), direction(cultures));
        let mut x = Vec::with_capacity(n * d);
        let (mut model, mut language, mut culture) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let (l, c) = (i % languages, (i / languages) % cultures);
            for j in 0..d {
                x.push(lang_dir[l][j] + cult_dir[c][j] + 0.8 * rng.normal() as f32);
            }
            model.push(format!("m{}", i % 2));
            language.push(format!("l{l}"));
            culture.push(format!("c{c}"));
        }
        Synthetic { x, d, model, language, culture }
    }

    fn rows(&self) -> usize {
        self.model.len()
    }

    /// The layout of `rows` (all rows for `None`), in that order.
    fn layout(&self, rows: Option<&[u32]>, pooling: Pooling) -> SosLayout {
        let pick = |col: &[String]| -> Vec<String> {
            match rows {
                Some(r) => r.iter().map(|&i| col[i as usize].clone()).collect(),
                None => col.to_vec(),
            }
        };
        let (model, language, culture) = (pick(&self.model), pick(&self.language), pick(&self.culture));
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        SosLayout::new(cols, pooling).unwrap()
    }

    fn table(&self, device: &Device) -> Tensor<2> {
        Tensor::from_data(TensorData::new(self.x.clone(), [self.rows(), self.d]), device)
    }
}

/// The graph's packed result for rows `rows` of `table` on its device (the reference).
fn graph(table: &Tensor<2>, rows: Option<&[u32]>, layout: &SosLayout) -> Vec<f32> {
    let device = table.device();
    let x = match rows {
        Some(r) => table.clone().select(0, id_tensor(r, &device)),
        None => table.clone(),
    };
    let ids = |v: &[u32]| -> Tensor<1, Int> { id_tensor(v, &device) };
    sos_tensor(
        x,
        ids(&layout.pair),
        ids(&layout.pair_sur),
        layout.sur_names.len(),
        ids(&layout.pair_sem),
        layout.sem_names.len(),
        None,
    )
    .into_data()
    .try_into_vec::<f32>()
    .unwrap()
}

/// Largest |fused − graph| of the scores and largest relative difference of the norms, after
/// checking both have the layout's length.
fn fused_vs_graph(fused: &[f32], graph: &[f32], layout: &SosLayout) -> (f32, f32) {
    let n = layout.len();
    assert_eq!(fused.len(), n + layout.sur_names.len() + layout.sem_names.len());
    assert_eq!(fused.len(), graph.len());
    let score = fused[..n].iter().zip(&graph[..n]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    let norm = fused[n..].iter().zip(&graph[n..]).map(|(a, b)| (a - b).abs() / b.abs()).fold(0.0, f32::max);
    (score, norm)
}

/// Asserts that the fused result for rows `rows` of `table` equals the graph on `table`'s own
/// device to [`FUSED_BOUND`].
fn assert_fused_matches(
    case: &str,
    fused: Tensor<1>,
    table: &Tensor<2>,
    rows: Option<&[u32]>,
    layout: &SosLayout,
) {
    let fused: Vec<f32> = fused.into_data().try_into_vec::<f32>().unwrap();
    let (score, norm) = fused_vs_graph(&fused, &graph(table, rows, layout), layout);
    println!(
        "{case}: max |fused - graph| score {score:.2e}, norm (relative) {norm:.2e} (bound {FUSED_BOUND:.0e})"
    );
    assert!(
        score <= FUSED_BOUND && norm <= FUSED_BOUND,
        "{case}: fused and graph differ: {score:e} / {norm:e}"
    );
}

#[test]
fn fused_kernels_equal_the_graph_on_wgpu() {
    let device = wgpu();
    assert!(fused_kernels_on(&device), "wgpu must run the fused SoS kernels");
    assert!(!fused_kernels_on(&Device::flex()), "flex keeps its blocked CPU graph");
    // Widths: one unit per column (5), a tail past a power of two (300 = 256 + 44), several
    // columns per unit (1280, the paper's); 2 × 3 pairs of 700 rows take 11 segments each.
    for (n, d, languages, cultures) in [(90, 5, 3, 5), (4200, 300, 2, 3), (1000, 1280, 4, 25)] {
        let data = Synthetic::new(n, d, languages, cultures, d as u64);
        let table = data.table(&device);
        for pooling in [Pooling::All, Pooling::PerModel] {
            let layout = data.layout(None, pooling);
            let fused = sos_packed(std::slice::from_ref(&table), None, &layout, None);
            assert_fused_matches(&format!("n {n}, d {d}, {pooling:?}"), fused, &table, None, &layout);
        }
    }
}

#[test]
fn fused_kernels_score_row_subsets_and_blocked_tables() {
    let device = wgpu();
    let data = Synthetic::new(3000, 96, 3, 4, 7);
    const { assert!(3000 / 12 > SEGMENT_ROWS, "pairs must span several segments") };
    let table = data.table(&device);
    // A subset in scrambled order, rows repeated.
    let mut rng = SplitMix64::new(11);
    let rows: Vec<u32> = (0..2500).map(|_| rng.below(3000) as u32).collect();
    let layout = data.layout(Some(&rows), Pooling::All);
    let fused = sos_packed(std::slice::from_ref(&table), Some(&rows), &layout, None);
    assert_fused_matches("row subset", fused, &table, Some(&rows), &layout);

    // The table in three uneven blocks, whole and through the subset.
    let blocks: Vec<Tensor<2>> =
        [0..1, 1..1700, 1700..3000].into_iter().map(|r| table.clone().slice([r, 0..96])).collect();
    let layout_all = data.layout(None, Pooling::PerModel);
    let fused = sos_packed(&blocks, None, &layout_all, None);
    assert_fused_matches("3 blocks", fused, &table, None, &layout_all);
    let fused = sos_packed(&blocks, Some(&rows), &layout, None);
    assert_fused_matches("3 blocks, row subset", fused, &table, Some(&rows), &layout);
    // The graph route of the same blocks (the CPU), against the one-block graph.
    let cpu_blocks: Vec<Tensor<2>> = blocks.iter().map(|b| b.clone().to_device(&Device::flex())).collect();
    let cpu = sos_packed(&cpu_blocks, Some(&rows), &layout, Some(100));
    assert_fused_matches("3 blocks on flex", cpu, &table, Some(&rows), &layout);
}

/// Past 65,535 segments or group members the graph on lavapipe is no reference: Mesa's lavapipe
/// stops every shader loop after 65,535 iterations, and Burn's `select_assign` loops over all
/// rows, so rows past 65,535 drop out of its sums. These cases compare with the graph on flex.
#[test]
fn fused_kernels_handle_more_segments_than_a_grid_axis_or_a_loop_holds() {
    let device = wgpu();
    // 70,000 outputs, each its own culture: 70,000 one-row segments (> 65,535 cubes per axis),
    // two surface groups of 35,000 segments each, summed in two levels.
    let n = 70_000;
    let data = Synthetic::new(n, 3, 2, n, 3);
    let layout = data.layout(None, Pooling::All);
    assert_eq!(layout.pair_sur.len(), n);
    assert!(n / 2 > GROUP_MEMBERS);
    let fused = sos_packed(&[data.table(&device)], None, &layout, None);
    assert_fused_matches("70,000 segments", fused, &data.table(&Device::flex()), None, &layout);
}
