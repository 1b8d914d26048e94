//! Reads `.npy` files written by numpy and Parquet files written by pyarrow (not by this crate's
//! writers) and checks every value against what numpy itself reads back. The files and the
//! expected values come from `scripts/fixtures/make_table.py`.

use culturelens_table::{load_table, read_npy, read_parquet};
use culturelens_testkit::fixture;

/// The 3 × 5 matrix as numpy reads a file of `bits`-bit floats and converts it to float32.
fn expected(bits: u32) -> Vec<f32> {
    let text = std::fs::read_to_string(fixture(&format!("table/npy/expected_f{bits}.csv"))).unwrap();
    let rows: Vec<Vec<f32>> =
        text.lines().map(|l| l.split(',').map(|v| v.parse::<f32>().unwrap()).collect()).collect();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.len() == 5));
    rows.concat()
}

/// `got` equals numpy's float32 values of a `bits`-bit file bit for bit.
fn assert_numpy_values(file: &str, got: &[f32], bits: u32) {
    let want = expected(bits);
    assert_eq!(got.len(), want.len(), "{file}");
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(got.to_bits(), want.to_bits(), "{file}, element {i}: {got} != {want}");
    }
}

#[test]
fn npy_from_numpy_reads_to_numpys_values() {
    for (file, bits) in [
        ("f16_v1.npy", 16),
        ("f16_be.npy", 16),
        ("f32_v1.npy", 32),
        ("f32_be.npy", 32),
        ("f32_v2.npy", 32),
        ("f64_v1.npy", 64),
        ("f64_be.npy", 64),
        ("f64_v3.npy", 64),
    ] {
        let m = read_npy(&fixture(&format!("table/npy/{file}"))).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!((m.rows(), m.cols()), (3, 5), "{file}");
        // Bit-exact: the same float32 numpy's `astype(np.float32)` gives.
        assert_numpy_values(file, m.data(), bits);
    }
    // f16 really rounds (it holds a subnormal and -1234.5678 becomes -1235); f64 read as f32 is
    // numpy's own f64 -> f32 cast, the same values as the f32 file.
    assert_eq!(expected(16)[7], 2.002_716e-5);
    assert_eq!(expected(16)[14], -1235.0);
    assert_eq!(expected(32)[14], -1234.5677);
    assert_eq!(expected(32), expected(64));
}

#[test]
fn fortran_ordered_npy_is_refused_by_name() {
    let path = fixture("table/npy/f32_fortran.npy");
    let err = read_npy(&path).unwrap_err().to_string();
    assert!(
        err.contains("f32_fortran.npy")
            && err.contains("Fortran-ordered arrays are not supported: save with np.ascontiguousarray(x)"),
        "{err}"
    );
}

#[test]
fn parquet_from_pyarrow_reads_embeddings_and_metadata() {
    for (file, bits) in [
        ("list_f32.parquet", 32),
        ("fixed_f32.parquet", 32),
        ("list_f64.parquet", 64),
        ("fixed_f16.parquet", 16),
    ] {
        let t = read_parquet(&fixture(&format!("table/parquet/{file}")))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!((t.len(), t.dim()), (3, 5), "{file}");
        assert_numpy_values(file, t.embeddings.data(), bits);
        // Metadata in file order without the embedding column; numbers and booleans as text,
        // nulls as empty strings.
        assert_eq!(t.meta.names(), ["model", "seed", "layer", "weight", "kept", "tag"], "{file}");
        let col = |name: &str| t.meta.column(name).unwrap().to_vec();
        assert_eq!(col("model"), ["m-a", "", "m,c"], "{file}");
        assert_eq!(col("seed"), ["42", "-7", "9007199254740993"], "{file}");
        assert_eq!(col("layer"), ["0", "4", "24"], "{file}");
        assert_eq!(col("weight"), ["0.5", "-1.25", "3"], "{file}");
        assert_eq!(col("kept"), ["true", "false", "true"], "{file}");
        assert_eq!(col("tag"), ["α", "", "東京"], "{file}");
    }
}

#[test]
fn pyarrow_table_loads_like_the_same_numpy_matrix() {
    // Through the validating entry point every command uses: same embeddings from both formats.
    let npy = load_table(&fixture("table/npy/f32_v1.npy"), None).unwrap();
    let parquet = load_table(&fixture("table/parquet/list_f32.parquet"), None).unwrap();
    assert_eq!(npy.embeddings, parquet.embeddings);
}

/// pyarrow's defaults on constant columns put about 1,000 values in a byte of page: the page
/// checks of the reader (`parquet_pages.rs`) accept what real writers produce.
#[test]
fn pyarrow_constant_columns_pass_the_page_checks() {
    let t = read_parquet(&fixture("table/parquet/constant_200k.parquet")).unwrap();
    assert_eq!((t.len(), t.dim()), (200_000, 4));
    assert!(t.embeddings.data().iter().all(|&v| v == 0.0));
    assert!(t.meta.column("model").unwrap().iter().all(|m| m == "sd"));
    let languages = t.meta.column("language").unwrap();
    assert!(languages.iter().enumerate().all(|(i, l)| l == ["en", "de"][i % 2]));
}
