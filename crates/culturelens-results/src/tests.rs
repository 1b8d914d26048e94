//! Every schema: golden bytes of its writer (the files are a contract), a round trip through its
//! reader, its header read back as the columns it was written from, and reader errors that name
//! file, row, line and column.

use std::collections::BTreeMap;
use std::fmt::Debug;

use culturelens_metrics::stats::Summary;
use serde_json::json;

use crate::captions::{CoverageRow, TermRow, TopTermRow};
use crate::ci::Interval;
use crate::colour::{DominantRow, PaletteColour, PaletteRow, ValueRow};
use crate::cultext2i::{CcsMatrix, Confusion, Cultext2iColumns, Cultext2iReport, Cultext2iRow, VqaScore};
use crate::kind::{Place, ResultKind, commands, outputs};
use crate::magbig::{MagbigColumns, MagbigRow};
use crate::sos::{
    ComparisonColumns, Factor, JointColumns, JointScore, LanguageCorrelation, LanguageMedian,
    PairedDifference, PerImageColumns, PerImageScore, PersonMean, SosReport,
};
use crate::validate::{ValidationColumns, ValidationRow};
use crate::vendi::{Order, Protocol, VendiFile, VendiScores};
use crate::{CsvSchema, SchemaError, captions, colour, cultext2i, magbig, read, sos, validate, vendi, write};

/// Writes `rows` with `columns`, checks the bytes against `golden`, reads them back and checks
/// the columns and rows, and that the header alone reads back as `columns`.
fn round_trip<S: CsvSchema>(columns: S::Columns, rows: Vec<S::Row>, golden: &str)
where
    S::Columns: Debug + PartialEq,
    S::Row: Debug + PartialEq,
{
    let mut bytes = Vec::new();
    write::<S>(&mut bytes, &columns, &rows).unwrap();
    assert_eq!(String::from_utf8(bytes.clone()).unwrap(), golden, "{}", S::SOURCE);
    let (c, r) = read::<S>("t.csv", bytes.as_slice()).unwrap();
    assert_eq!(c, columns, "{}", S::SOURCE);
    assert_eq!(r, rows, "{}", S::SOURCE);
    // The writer's header is the one its reader expects: the same function.
    assert_eq!(S::columns("t.csv", &S::header(&columns)).unwrap(), columns, "{}", S::SOURCE);
}

fn joint(layer: Option<&str>, culture: &str, sos: f64) -> JointScore {
    JointScore {
        model: "m".into(),
        layer: layer.map(str::to_string),
        language: "en".into(),
        culture: culture.into(),
        n: 3,
        sos,
        sos_ci: None,
    }
}

#[test]
fn sos_tables_round_trip() {
    round_trip::<sos::Joint>(
        JointColumns { layer: false, ci: false },
        vec![joint(None, "Japan", 0.1), joint(None, "India, \"north\"", -0.25)],
        "model,language,culture,n,sos\nm,en,Japan,3,0.1\nm,en,\"India, \"\"north\"\"\",3,-0.25\n",
    );
    round_trip::<sos::Joint>(
        JointColumns { layer: true, ci: false },
        vec![joint(Some("10"), "Japan", 1.0 / 3.0)],
        "model,layer,language,culture,n,sos\nm,10,en,Japan,3,0.3333333333333333\n",
    );
    // With --ci: the bounds after the estimate, an undefined interval as two empty cells.
    let with_ci =
        JointScore { sos_ci: Some(Interval { lo: -0.5, hi: 0.25 }), ..joint(Some("4"), "Japan", 0.125) };
    round_trip::<sos::Joint>(
        JointColumns { layer: true, ci: true },
        vec![with_ci, joint(Some("4"), "Chad", 0.5)],
        "model,layer,language,culture,n,sos,sos_lo,sos_hi\nm,4,en,Japan,3,0.125,-0.5,0.25\nm,4,en,Chad,3,0.5,,\n",
    );
    let score = |layer: Option<&str>, person: Option<&str>| PerImageScore {
        row: 7,
        image: None,
        model: "m".into(),
        layer: layer.map(str::to_string),
        language: "de".into(),
        culture: "Japan".into(),
        person: person.map(str::to_string),
        // An f32 is written in full: the shortest f64 text of its exact value, so pandas and R,
        // which read f64, get the device's number (0.1f32 is 0.10000000149011612).
        sos: 0.1,
    };
    round_trip::<sos::PerImage>(
        PerImageColumns { image: false, layer: false, person: false },
        vec![score(None, None)],
        "row,model,language,culture,sos\n7,m,de,Japan,0.10000000149011612\n",
    );
    // With the table's `image` column, after `row`.
    round_trip::<sos::PerImage>(
        PerImageColumns { image: true, layer: true, person: false },
        vec![PerImageScore {
            image: Some("imgs/000007_00.png".into()),
            sos: -0.0007280753,
            ..score(Some("12"), None)
        }],
        "row,image,model,layer,language,culture,sos\n7,imgs/000007_00.png,m,12,de,Japan,-0.0007280752761289477\n",
    );
    round_trip::<sos::PerImage>(
        PerImageColumns { image: false, layer: true, person: true },
        vec![score(Some("2"), Some("woman"))],
        "row,model,layer,language,culture,person,sos\n7,m,2,de,Japan,woman,0.10000000149011612\n",
    );
    round_trip::<sos::PerImage>(
        PerImageColumns { image: false, layer: false, person: true },
        vec![score(None, Some(""))],
        "row,model,language,culture,person,sos\n7,m,de,Japan,,0.10000000149011612\n",
    );
}

#[test]
fn sos_report_round_trips_in_field_order() {
    let report = SosReport {
        joint: vec![joint(None, "Japan", 0.5)],
        per_model: BTreeMap::from([(
            "m".to_string(),
            Summary { n: 2, mean: 0.5, median: 0.5, q1: 0.25, q3: 0.75, min: 0.0, max: 1.0 },
        )]),
        language_medians: vec![LanguageMedian {
            model: "m".into(),
            layer: None,
            language: "en".into(),
            n: 2,
            mean: 0.5,
            median: 0.5,
            strong_surface: true,
        }],
        strong_surface_threshold: 0.5,
        language_correlation: LanguageCorrelation {
            languages: vec!["de".into(), "en".into()],
            r: vec![vec![Some(1.0), None], vec![None, Some(1.0)]],
            pairs: vec![vec![3, 1], vec![1, 3]],
        },
        person_means: vec![PersonMean { model: None, person: "woman".into(), n: 2, mean: -0.125 }],
    };
    let mut bytes = Vec::new();
    sos::write_report(&mut bytes, &report).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    // Keys in field order (not sorted), no final newline, absent layer left out, null model kept.
    assert!(
        text.starts_with("{\n  \"joint\": [\n    {\n      \"model\": \"m\",\n      \"language\": \"en\""),
        "{text}"
    );
    assert!(text.find("\"per_model\"").unwrap() < text.find("\"language_medians\"").unwrap());
    assert!(text.contains("\"model\": null") && !text.contains("\"layer\"") && !text.ends_with('\n'));
    assert_eq!(sos::read_report("r.json", bytes.as_slice()).unwrap(), report);

    // A layer is a number in the JSON (pandas and R read it as one); a layer name that is not
    // an integer stays a string, and both read back.
    let mut layered = report.clone();
    layered.joint = vec![joint(Some("12"), "Japan", 0.5), joint(Some("final"), "Japan", 0.5)];
    layered.language_medians[0].layer = Some("3".into());
    let mut bytes = Vec::new();
    sos::write_report(&mut bytes, &layered).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["joint"][0]["layer"], json!(12));
    assert_eq!(value["joint"][1]["layer"], json!("final"));
    assert_eq!(value["language_medians"][0]["layer"], json!(3));
    assert_eq!(sos::read_report("r.json", bytes.as_slice()).unwrap(), layered);

    let mut bad = report.clone();
    bad.language_correlation.r.pop();
    let mut bytes = Vec::new();
    sos::write_report(&mut bytes, &bad).unwrap();
    let e = sos::read_report("r.json", bytes.as_slice()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "r.json, column language_correlation.r: language_correlation.r is not 2 × 2 (one row and column per language)"
    );
    let e = sos::read_report("r.json", &b"{\"joint\": []}"[..]).unwrap_err().to_string();
    assert!(e.starts_with("r.json: not a `culturelens sos --report` JSON: missing field `per_model`"), "{e}");
}

#[test]
fn vendi_files_are_the_bytes_the_json_values_gave() {
    let scores = VendiScores {
        n: 40,
        q: Order::Finite(1.0),
        vs: 3.5,
        qvs: 2.75,
        qvs_norm: 0.06875,
        intdiv: Some(Some(0.5)),
        protocol: None,
        vs_ci: None,
        qvs_ci: None,
        qvs_norm_ci: None,
    };
    let protocol = VendiScores {
        q: Order::Infinity,
        intdiv: Some(None),
        protocol: Some(Protocol {
            batch_size: 8,
            repeats: 4,
            vs_sd: 0.25,
            qvs_sd: 0.125,
            qvs_norm_sd: 0.015625,
            intdiv_sd: Some(None),
        }),
        ..scores
    };
    let plain = VendiScores { intdiv: None, ..scores };
    let ci = |lo, hi| Some(Interval { lo, hi });
    let with_ci =
        VendiScores { vs_ci: ci(3.0, 4.0), qvs_ci: ci(2.5, 3.0), qvs_norm_ci: ci(0.0625, 0.075), ..plain };
    // What `vendi` wrote before the schema: serde_json values (keys sorted), pretty, no newline.
    let before = |v: serde_json::Value| serde_json::to_vec_pretty(&v).unwrap();
    let cases = [
        (
            VendiFile::Whole(scores),
            json!({"n": 40, "q": 1.0, "vs": 3.5, "qvs": 2.75, "qvs_norm": 0.06875, "intdiv": 0.5}),
        ),
        (VendiFile::Whole(plain), json!({"n": 40, "q": 1.0, "vs": 3.5, "qvs": 2.75, "qvs_norm": 0.06875})),
        (
            VendiFile::Groups(BTreeMap::from([("de".to_string(), protocol), ("en".to_string(), plain)])),
            json!({
                "de": {"n": 40, "q": "inf", "vs": 3.5, "qvs": 2.75, "qvs_norm": 0.06875,
                       "vs_sd": 0.25, "qvs_sd": 0.125, "qvs_norm_sd": 0.015625, "batch_size": 8, "repeats": 4,
                       "intdiv": null, "intdiv_sd": null},
                "en": {"n": 40, "q": 1.0, "vs": 3.5, "qvs": 2.75, "qvs_norm": 0.06875},
            }),
        ),
        (VendiFile::Groups(BTreeMap::new()), json!({})),
        (
            VendiFile::Whole(with_ci),
            json!({"n": 40, "q": 1.0, "vs": 3.5, "qvs": 2.75, "qvs_norm": 0.06875, "vs_ci": {"lo": 3.0, "hi": 4.0},
                   "qvs_ci": {"lo": 2.5, "hi": 3.0}, "qvs_norm_ci": {"lo": 0.0625, "hi": 0.075}}),
        ),
        (
            VendiFile::Groups(BTreeMap::from([("vs".to_string(), plain)])),
            json!({"vs": {"n": 40, "q": 1.0, "vs": 3.5, "qvs": 2.75, "qvs_norm": 0.06875}}),
        ),
    ];
    for (file, value) in cases {
        let mut bytes = Vec::new();
        vendi::write(&mut bytes, &file).unwrap();
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), String::from_utf8(before(value)).unwrap());
        assert_eq!(vendi::read("v.json", bytes.as_slice()).unwrap(), file);
    }
    assert_eq!(VendiFile::Whole(plain).groups(), [("all".to_string(), plain)]);
    let e = vendi::read("v.json", &br#"{"de": {"n": 1}}"#[..]).unwrap_err().to_string();
    assert!(e.starts_with("v.json, column de: not a `culturelens vendi --out` group: missing field"), "{e}");
    let e =
        vendi::read("v.json", &br#"{"n": 1, "q": -1, "vs": 1, "qvs": 1, "qvs_norm": 1}"#[..]).unwrap_err();
    assert!(e.to_string().contains("order q must be a number >= 0 or `inf`, got `-1`"), "{e}");
}

/// `vendi --csv`: the group columns, then the JSON's numbers in full precision (q = ∞ as `inf`,
/// an undefined intdiv as an empty cell), for pandas and R.
#[test]
fn vendi_tables_round_trip() {
    let scores = VendiScores {
        n: 40,
        q: Order::Finite(1.0),
        vs: 3.5,
        qvs: 2.75,
        qvs_norm: 0.06875,
        intdiv: None,
        protocol: None,
        vs_ci: None,
        qvs_ci: None,
        qvs_norm_ci: None,
    };
    round_trip::<vendi::Table>(
        vendi::TableColumns { groups: vec![], intdiv: false, protocol: false, ci: false },
        vec![vendi::TableRow { group: vec![], scores }],
        "n,q,vs,qvs,qvs_norm\n40,1,3.5,2.75,0.06875\n",
    );
    // With --ci: each score's bounds right after it, an undefined interval as two empty cells.
    let with_ci = VendiScores {
        vs_ci: Some(Interval { lo: 3.0, hi: 4.25 }),
        qvs_ci: None,
        qvs_norm_ci: Some(Interval { lo: 0.0625, hi: 0.5 }),
        intdiv: Some(Some(0.5)),
        ..scores
    };
    round_trip::<vendi::Table>(
        vendi::TableColumns { groups: vec!["language".into()], intdiv: true, protocol: false, ci: true },
        vec![vendi::TableRow { group: vec!["de".into()], scores: with_ci }],
        "language,n,q,vs,vs_lo,vs_hi,qvs,qvs_lo,qvs_hi,qvs_norm,qvs_norm_lo,qvs_norm_hi,intdiv\n\
         de,40,1,3.5,3,4.25,2.75,,,0.06875,0.0625,0.5,0.5\n",
    );
    let protocol = VendiScores {
        q: Order::Infinity,
        intdiv: Some(None),
        protocol: Some(Protocol {
            batch_size: 8,
            repeats: 4,
            vs_sd: 0.25,
            qvs_sd: 0.125,
            qvs_norm_sd: 1.0 / 3.0,
            intdiv_sd: Some(None),
        }),
        ..scores
    };
    let second = VendiScores { intdiv: Some(Some(0.5)), ..protocol };
    let second = VendiScores {
        protocol: Some(Protocol { intdiv_sd: Some(Some(0.1)), ..second.protocol.unwrap() }),
        ..second
    };
    round_trip::<vendi::Table>(
        vendi::TableColumns {
            groups: vec!["language".into(), "culture".into()],
            intdiv: true,
            protocol: true,
            ci: false,
        },
        vec![
            vendi::TableRow { group: vec!["de".into(), "Japan".into()], scores: protocol },
            vendi::TableRow { group: vec!["en".into(), "n".into()], scores: second },
        ],
        "language,culture,n,q,vs,qvs,qvs_norm,intdiv,batch_size,repeats,vs_sd,qvs_sd,qvs_norm_sd,intdiv_sd\n\
         de,Japan,40,inf,3.5,2.75,0.06875,,8,4,0.25,0.125,0.3333333333333333,\n\
         en,n,40,inf,3.5,2.75,0.06875,0.5,8,4,0.25,0.125,0.3333333333333333,0.1\n",
    );
    let e = read::<vendi::Table>("v.csv", &b"group,n,q,vs\n"[..]).unwrap_err().to_string();
    assert!(
        e.starts_with("v.csv: header is `group,n,q,vs`, expected `GROUP…,n,q,vs,[vs_lo,vs_hi,]qvs,"),
        "{e}"
    );
    let e = read::<vendi::Table>("v.csv", &b"n,q,vs,qvs,qvs_norm\n1,-1,1,1,1\n"[..]).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("column q") && e.contains("`-1`"), "{e}");
}

#[test]
fn orders_parse_and_print() {
    assert_eq!(Order::parse(" INF "), Ok(Order::Infinity));
    assert_eq!(Order::parse("2.5"), Ok(Order::Finite(2.5)));
    assert!(Order::parse("-1").is_err() && Order::parse("x").is_err());
    assert_eq!((Order::Finite(0.5).to_string(), Order::Infinity.to_string()), ("0.5".into(), "inf".into()));
}

#[test]
fn magbig_table_round_trips_and_names_bad_cells() {
    let row = MagbigRow {
        model: "sd".into(),
        language: "de".into(),
        set: "adjectives".into(),
        n_prompts: 2,
        n_images: 4,
        mad: 0.5,
        mad_random: 0.4375,
        male_share: 0.75,
        mad_ci: None,
        male_share_ci: None,
    };
    round_trip::<magbig::Magbig>(
        MagbigColumns { ci: false },
        vec![row.clone()],
        "model,language,set,n_prompts,n_images,mad,mad_random,male_share\nsd,de,adjectives,2,4,0.5,0.4375,0.75\n",
    );
    // With --ci: bounds after mad and male_share; an undefined interval is two empty cells.
    let with_ci = MagbigRow { mad_ci: Some(Interval { lo: 0.25, hi: 0.75 }), ..row };
    round_trip::<magbig::Magbig>(
        MagbigColumns { ci: true },
        vec![with_ci],
        "model,language,set,n_prompts,n_images,mad,mad_lo,mad_hi,mad_random,male_share,male_share_lo,male_share_hi\n\
         sd,de,adjectives,2,4,0.5,0.25,0.75,0.4375,0.75,,\n",
    );
    let text = format!("{}\nm,en,s,1,2,0.5,0.1,0.5\nm,de,s,1,2,oops,0.1,0.5\n", magbig::HEADER.join(","));
    let e: SchemaError = read::<magbig::Magbig>("runs/magbig.csv", text.as_bytes()).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.row, e.line, e.column.as_deref()),
        ("runs/magbig.csv", Some(1), Some(3), Some("mad"))
    );
    assert_eq!(e.to_string(), "runs/magbig.csv, line 3 (data row 1), column mad: `oops` is not a number");
    let e = read::<magbig::Magbig>("m.csv", text.replace("0.1,0.5\nm,de", "inf,0.5\nm,de").as_bytes())
        .unwrap_err();
    assert_eq!(e.to_string(), "m.csv, line 2 (data row 0), column mad_random: `inf` is not a finite number");
    let e = read::<magbig::Magbig>("m.csv", text.replace("\nm,en,s", "\n ,en,s").as_bytes()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.csv, line 2 (data row 0), column model: empty value: every row needs one for this column"
    );
    let e = read::<magbig::Magbig>("m.csv", &b"model,language,set\nm,de,x\n"[..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.csv: header is `model,language,set`, expected \
         `model,language,set,n_prompts,n_images,mad,[mad_lo,mad_hi,]mad_random,male_share[,male_share_lo,male_share_hi]` \
         (culturelens magbig --out)"
    );
    let e = read::<magbig::Magbig>("m.csv", format!("{}\nm,de\n", magbig::HEADER.join(",")).as_bytes());
    assert!(e.unwrap_err().to_string().starts_with("m.csv, row 0: malformed CSV"));

    let attributes =
        "model,language,set,prompt_id,gender,image\nsd,de,occ,p1,male,a.png\nsd,de,occ,p1,,b.png\n";
    let columns = magbig::read_attributes("a.csv", attributes.as_bytes()).unwrap();
    assert_eq!(columns[4], ("gender".to_string(), vec!["male".to_string(), String::new()]));
    assert_eq!(columns[5].0, "image");
    let e = magbig::read_attributes("a.csv", &b"model,language,set,gender\n"[..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a.csv, column prompt_id: missing required column (columns present: model, language, set, gender)"
    );
}

fn cultext2i_row(dp: &[(&str, f64)]) -> Cultext2iRow {
    Cultext2iRow {
        model: "m".into(),
        language: "de".into(),
        concept: "city".into(),
        template: "t".into(),
        n: 2,
        na: 0.5,
        na_acc: 0.5,
        cd: 0.25,
        dp: dp.iter().map(|(l, v)| (l.to_string(), *v)).collect(),
        ci: Vec::new(),
    }
}

fn cultext2i_columns(dimensions: &[&str], ci: bool) -> Cultext2iColumns {
    Cultext2iColumns { dimensions: dimensions.iter().map(|d| d.to_string()).collect(), ci }
}

#[test]
fn cultext2i_outputs_round_trip() {
    round_trip::<cultext2i::Groups>(
        cultext2i_columns(&["modern", "rich"], false),
        vec![cultext2i_row(&[("modern", 0.7), ("rich", -0.125)])],
        "model,language,concept,template,n,na,na_acc,cd,dp_modern,dp_rich\nm,de,city,t,2,0.5,0.5,0.25,0.7,-0.125\n",
    );
    round_trip::<cultext2i::Groups>(
        cultext2i_columns(&[], false),
        vec![],
        "model,language,concept,template,n,na,na_acc,cd\n",
    );
    // With --ci: bounds after every estimate, an undefined interval as two empty cells.
    let ci = |lo, hi| Some(Interval { lo, hi });
    let row = Cultext2iRow {
        ci: vec![ci(0.25, 0.75), None, ci(0.125, 0.5), ci(0.5, 0.875)],
        ..cultext2i_row(&[("modern", 0.7)])
    };
    round_trip::<cultext2i::Groups>(
        cultext2i_columns(&["modern"], true),
        vec![row],
        "model,language,concept,template,n,na,na_lo,na_hi,na_acc,na_acc_lo,na_acc_hi,cd,cd_lo,cd_hi,\
         dp_modern,dp_modern_lo,dp_modern_hi\nm,de,city,t,2,0.5,0.25,0.75,0.5,,,0.25,0.125,0.5,0.7,0.5,0.875\n",
    );
    let e = read::<cultext2i::Groups>(
        "c.csv",
        &b"model,language,concept,template,n,na,na_lo,na_hi,na_acc,na_acc_lo,na_acc_hi,cd,cd_lo,cd_hi,dp_x,dp_x_lo\n"[..],
    );
    assert!(e.unwrap_err().to_string().contains("`dp_x` must be followed by its bounds"));
    let e =
        read::<cultext2i::Groups>("c.csv", &b"model,language,concept,template,n,na,na_acc,cd,extra\n"[..]);
    assert_eq!(e.unwrap_err().to_string(), "c.csv, column extra: columns after `cd` must be `dp_<label>`");

    let report = Cultext2iReport {
        ccs: vec![CcsMatrix {
            ccs: vec![vec![Some(0.5), None], vec![None, Some(0.25)]],
            languages: vec!["de".into(), "es".into()],
            model: "m".into(),
            template: "t".into(),
        }],
        confusion: BTreeMap::from([(
            "m".to_string(),
            Confusion { counts: vec![vec![1, 1], vec![0, 1]], n: 3, accuracy: Some(2.0 / 3.0) },
        )]),
        dimensions: vec!["modern".into()],
        nationalities: vec!["german".into(), "spanish".into()],
        vqa: Some(vec![VqaScore {
            language: "de".into(),
            majority: BTreeMap::from([
                ("city".to_string(), Some("german".to_string())),
                ("food".into(), None),
            ]),
            metric: "xna".into(),
            model: "m".into(),
            n_sets: 2,
            question: "nationality".into(),
            score: Some(0.5),
            template: "t".into(),
        }]),
    };
    // What `cultext2i --report` wrote before the schema: a json! value, pretty, final newline.
    let before = json!({
        "nationalities": ["german", "spanish"], "dimensions": ["modern"],
        "confusion": {"m": {"counts": [[1, 1], [0, 1]], "n": 3, "accuracy": 2.0 / 3.0}},
        "ccs": [{"model": "m", "template": "t", "languages": ["de", "es"], "ccs": [[0.5, null], [null, 0.25]]}],
        "vqa": [{"model": "m", "language": "de", "template": "t", "question": "nationality", "metric": "xna",
                 "score": 0.5, "n_sets": 2, "majority": {"city": "german", "food": null}}],
    });
    let mut bytes = Vec::new();
    cultext2i::write_report(&mut bytes, &report).unwrap();
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        serde_json::to_string_pretty(&before).unwrap() + "\n"
    );
    assert_eq!(cultext2i::read_report("r.json", bytes.as_slice()).unwrap(), report);
    let without_vqa = Cultext2iReport { vqa: None, ..report };
    let mut bytes = Vec::new();
    cultext2i::write_report(&mut bytes, &without_vqa).unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("vqa"));
    assert_eq!(cultext2i::read_report("r.json", bytes.as_slice()).unwrap(), without_vqa);
    let square =
        String::from_utf8(bytes).unwrap().replacen("[\n          0,\n          1\n        ]", "[0]", 1);
    let e = cultext2i::read_report("r.json", square.as_bytes()).unwrap_err();
    assert!(e.to_string().contains("confusion matrix of model `m` is not 2 × 2"), "{e}");
}

fn colour(rank: usize) -> PaletteColour {
    PaletteColour { rank, rgb: [255.0, 0.5, 0.0], hex: "#ff0100".into(), share: 0.75, hsv: [0.0, 1.0, 1.0] }
}

#[test]
fn colour_tables_round_trip() {
    let groups = vec!["model".to_string(), "language".to_string()];
    round_trip::<colour::Dominant>(
        groups.clone(),
        vec![DominantRow { image: "a.png".into(), group: vec!["m".into(), "de".into()], colour: colour(1) }],
        "image,model,language,rank,r,g,b,hex,share,h,s,v\na.png,m,de,1,255,0.5,0,#ff0100,0.75,0,1,1\n",
    );
    round_trip::<colour::Palettes>(
        groups.clone(),
        vec![PaletteRow { group: vec!["m".into(), "".into()], n_images: 2, colour: colour(2) }],
        "model,language,n_images,rank,r,g,b,hex,share,h,s,v\nm,,2,2,255,0.5,0,#ff0100,0.75,0,1,1\n",
    );
    round_trip::<colour::Palettes>(
        vec![],
        vec![PaletteRow { group: vec![], n_images: 1, colour: colour(1) }],
        "n_images,rank,r,g,b,hex,share,h,s,v\n1,1,255,0.5,0,#ff0100,0.75,0,1,1\n",
    );
    round_trip::<colour::Values>(
        vec!["model".into()],
        vec![ValueRow { group: vec!["m".into()], n_images: 3, v_lo: 0.9, v_hi: 1.0, share: 0.25 }],
        "model,n_images,v_lo,v_hi,share\nm,3,0.9,1,0.25\n",
    );
    let e = read::<colour::Values>("values.csv", &b"model,n_images,v_lo,share\n"[..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "values.csv: header is `model,n_images,v_lo,share`, expected `GROUP…,n_images,v_lo,v_hi,share` (culturelens colour --out: values.csv)"
    );
}

#[test]
fn caption_tables_round_trip() {
    round_trip::<captions::Terms>(
        (),
        vec![TermRow {
            model: "m".into(),
            language: "de".into(),
            n_images: 4,
            term: "kimono".into(),
            images: 3,
            share: 0.75,
            idf: 1.5,
            weighted: 4.5,
            weighted_other: 0.5,
            delta: 1.25,
            z: 2.5,
            significant: true,
        }],
        "model,language,n_images,term,images,share,idf,weighted,weighted_other,delta,z,significant\n\
         m,de,4,kimono,3,0.75,1.5,4.5,0.5,1.25,2.5,true\n",
    );
    round_trip::<captions::TopTerms>(
        (),
        vec![TopTermRow {
            model: "m".into(),
            language: "de".into(),
            rank: 1,
            term: "kimono".into(),
            images: 3,
            share: 0.75,
            z: 2.5,
        }],
        "model,language,rank,term,images,share,z\nm,de,1,kimono,3,0.75,2.5\n",
    );
    let coverage = |found: &[&str]| CoverageRow {
        model: "m".into(),
        language: "de".into(),
        culture: "Japan".into(),
        stereotypes: 4,
        found: found.iter().map(|s| s.to_string()).collect(),
        coverage: found.len() as f64 / 4.0,
    };
    round_trip::<captions::Coverage>(
        (),
        vec![coverage(&["kimono", "sushi"]), coverage(&[])],
        "model,language,culture,stereotypes,found,coverage,found_terms\nm,de,Japan,4,2,0.5,kimono;sushi\n\
         m,de,Japan,4,0,0,\n",
    );
    let bad =
        "model,language,culture,stereotypes,found,coverage,found_terms\nm,de,Japan,4,1,0.5,kimono;sushi\n";
    let e = read::<captions::Coverage>("coverage.csv", bad.as_bytes()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "coverage.csv, line 2 (data row 0), column found_terms: 2 terms, but `found` says 1"
    );
    let bad = "model,language,n_images,term,images,share,idf,weighted,weighted_other,delta,z,significant\n\
               m,de,4,kimono,3,0.75,1.5,4.5,0.5,1.25,2.5,yes\n";
    let e = read::<captions::Terms>("terms.csv", bad.as_bytes()).unwrap_err();
    assert_eq!(e.column.as_deref(), Some("significant"));
}

#[test]
fn validation_table_round_trips_with_undefined_values_empty() {
    let all = ValidationRow {
        method: "sos".into(),
        subset: "all".into(),
        n: 4,
        acc: Some(0.75),
        p_sur: None,
        p_sem: Some(1.0),
        ci: [None; 3],
    };
    let empty = ValidationRow {
        method: "sos".into(),
        subset: "no_en".into(),
        n: 0,
        acc: None,
        p_sur: None,
        p_sem: None,
        ci: [None; 3],
    };
    round_trip::<validate::Validation>(
        ValidationColumns { ci: false },
        vec![all.clone(), empty.clone()],
        "method,subset,n,acc,p_sur,p_sem\nsos,all,4,0.75,,1\nsos,no_en,0,,,\n",
    );
    let with_ci = ValidationRow {
        ci: [Some(Interval { lo: 0.5, hi: 1.0 }), None, Some(Interval { lo: 1.0, hi: 1.0 })],
        ..all
    };
    round_trip::<validate::Validation>(
        ValidationColumns { ci: true },
        vec![with_ci, empty],
        "method,subset,n,acc,acc_lo,acc_hi,p_sur,p_sur_lo,p_sur_hi,p_sem,p_sem_lo,p_sem_hi\n\
         sos,all,4,0.75,0.5,1,,,,1,1,1\nsos,no_en,0,,,,,,,,,\n",
    );
}

#[test]
fn every_schema_header_names_its_kind_alone() {
    fn kind_of<S: CsvSchema>(columns: &S::Columns) -> Option<ResultKind> {
        ResultKind::of_header(&S::header(columns))
    }
    let groups = vec!["model".to_string(), "language".to_string()];
    for (layer, ci) in [(false, false), (true, false), (false, true), (true, true)] {
        assert_eq!(kind_of::<sos::Joint>(&JointColumns { layer, ci }), Some(ResultKind::SosJoint));
    }
    for factor in [Factor::Models, Factor::Languages] {
        let columns = ComparisonColumns { factor, layer: false };
        assert_eq!(kind_of::<sos::Comparison>(&columns), Some(ResultKind::SosComparison));
    }
    let per_image = PerImageColumns { image: false, layer: true, person: false };
    assert_eq!(kind_of::<sos::PerImage>(&per_image), Some(ResultKind::SosPerImage));
    for ci in [false, true] {
        assert_eq!(kind_of::<magbig::Magbig>(&MagbigColumns { ci }), Some(ResultKind::Magbig));
    }
    for ci in [false, true] {
        assert_eq!(
            kind_of::<cultext2i::Groups>(&cultext2i_columns(&["modern"], ci)),
            Some(ResultKind::Cultext2i)
        );
    }
    assert_eq!(kind_of::<colour::Dominant>(&groups), Some(ResultKind::ColourDominant));
    assert_eq!(kind_of::<colour::Palettes>(&groups), Some(ResultKind::ColourPalettes));
    assert_eq!(kind_of::<colour::Values>(&groups), Some(ResultKind::ColourValues));
    assert_eq!(kind_of::<captions::Terms>(&()), Some(ResultKind::CaptionsTerms));
    assert_eq!(kind_of::<captions::TopTerms>(&()), Some(ResultKind::CaptionsTopTerms));
    assert_eq!(kind_of::<captions::Coverage>(&()), Some(ResultKind::CaptionsCoverage));
    for ci in [false, true] {
        assert_eq!(kind_of::<validate::Validation>(&ValidationColumns { ci }), Some(ResultKind::Validation));
    }
    assert_eq!(ResultKind::of_header(&["model".into(), "x".into()]), None);
}

#[test]
fn every_flag_output_is_named_after_its_command() {
    for (command, list) in commands() {
        for output in list {
            let source = output.kind.source();
            match output.place {
                Place::Flag(flag) => assert_eq!(source, format!("culturelens {command} {flag}")),
                // The demo's joint table is the sos command's table, in the demo's folder.
                Place::InFolder(name) if command == "demo" => assert_eq!(name, sos::DEMO_JOINT),
                Place::InFolder(name) => assert_eq!(source, format!("culturelens {command} --out: {name}")),
            }
        }
    }
    assert_eq!(outputs("sos").len(), 4);
    assert!(outputs("embed").is_empty());
}

#[test]
fn comparison_table_round_trips() {
    let row = |a: &str, b: &str, shared: &str, layer: Option<&str>, ci| PairedDifference {
        a: a.into(),
        b: b.into(),
        shared: shared.into(),
        layer: layer.map(str::to_string),
        culture: "Japan".into(),
        n_pairs: 9,
        diff: -0.125,
        diff_ci: ci,
        p_value: 0.0078125,
        p_holm: 0.5,
        exact: true,
    };
    let ci = Some(Interval { lo: -0.25, hi: 0.0625 });
    round_trip::<sos::Comparison>(
        ComparisonColumns { factor: Factor::Models, layer: false },
        vec![row("SD21", "K3", "de", None, ci), row("SD21", "K3", "fi", None, None)],
        "model_a,model_b,language,culture,n_pairs,diff,diff_lo,diff_hi,p_value,p_holm,exact\n\
         SD21,K3,de,Japan,9,-0.125,-0.25,0.0625,0.0078125,0.5,true\n\
         SD21,K3,fi,Japan,9,-0.125,,,0.0078125,0.5,true\n",
    );
    round_trip::<sos::Comparison>(
        ComparisonColumns { factor: Factor::Languages, layer: true },
        vec![row("de", "en", "SD21", Some("8"), ci)],
        "language_a,language_b,model,layer,culture,n_pairs,diff,diff_lo,diff_hi,p_value,p_holm,exact\n\
         de,en,SD21,8,Japan,9,-0.125,-0.25,0.0625,0.0078125,0.5,true\n",
    );
}

#[test]
fn interval_cells_are_checked() {
    let header = "model,language,culture,n,sos,sos_lo,sos_hi\n";
    for (row, column, message) in [
        ("m,en,X,3,0.1,,0.2", "sos_lo", "empty lower bound"),
        ("m,en,X,3,0.1,0.3,0.2", "sos_lo", "above the upper bound"),
        ("m,en,X,3,0.1,0.0,inf", "sos_hi", "not a finite number"),
    ] {
        let text = format!("{header}{row}\n");
        let e = read::<sos::Joint>("j.csv", text.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("j.csv") && e.contains(column) && e.contains(message), "{e}");
    }
}
