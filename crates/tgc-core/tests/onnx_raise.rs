//! ONNX imports printed in the graph language (`frontend::raise`): ONNX's
//! operator cases (`.toolchain/onnx-node`, as `tests/onnx_node.rs` reads
//! them) and the `onnx` wheel's model-zoo models (`light_*.onnx`, with
//! `ConstantOfShape` weights) each print as text that reads back as the
//! imported program (`raise::to_source` checks it), or are refused as
//! `Unsupported` for one of the reasons the module doc lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tgc_core::diag::ErrorName;
use tgc_core::frontend::onnx::{self, proto};
use tgc_core::frontend::raise::to_source;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cases(dir: &Path, what: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(r) => r.map(|e| e.unwrap().path()).collect(),
        Err(e) => panic!("{}: {e}; scripts/setup.sh writes {what} there", dir.display()),
    };
    v.sort();
    v
}

/// The reasons `raise` refuses a program (its module doc).
const REASONS: [&str; 5] = [
    "a declared size is an integer or a symbol",
    "attributes are finite numbers",
    "dilated average pool",
    "of two literals",
    "has no graph-language call",
];

#[test]
fn onnx_operator_cases_print_and_read_back() {
    let dir = std::env::var_os("TGC_ONNX_NODE_DATA").map_or_else(|| root().join(".toolchain/onnx-node"), PathBuf::from);
    let (mut printed, mut refused) = (0, BTreeMap::<String, usize>::new());
    for case in cases(&dir, "ONNX's node cases") {
        let data = case.join("test_data_set_0");
        // Integer inputs are fixed at import, as `tests/onnx_node.rs` does.
        let fixed: Vec<_> = (0..)
            .map(|k| data.join(format!("input_{k}.pb")))
            .take_while(|p| p.exists())
            .map(|p| proto::decode_tensor(&std::fs::read(&p).unwrap()).unwrap())
            .filter(|t| t.data_type == proto::code::INT64)
            .collect();
        let Ok(imported) = onnx::read_model(&case.join("model.onnx"), &fixed) else { continue };
        match to_source(&imported.program) {
            Ok(_) => printed += 1,
            Err(d) => {
                let name = case.file_name().unwrap().to_string_lossy().into_owned();
                assert_eq!(d.name, ErrorName::Unsupported, "{name}: {}", d.message);
                let reason = REASONS.iter().find(|r| d.message.contains(*r));
                let reason = reason.unwrap_or_else(|| panic!("{name}: {}", d.message));
                *refused.entry(reason.to_string()).or_default() += 1;
            }
        }
    }
    println!("{printed} imported cases print and read back; refused: {refused:?}");
    assert!(printed >= 690, "only {printed} imported cases print");
}

#[test]
fn model_zoo_models_print_and_read_back() {
    let dir = root().join(".toolchain/onnx/onnx/backend/test/data/light");
    let models: Vec<PathBuf> =
        cases(&dir, "the `onnx` wheel").into_iter().filter(|p| p.extension().is_some_and(|e| e == "onnx")).collect();
    assert!(models.len() >= 5, "only {} models in {}", models.len(), dir.display());
    for m in &models {
        let imported = onnx::read_model(m, &[]).unwrap_or_else(|d| panic!("{}: {}", m.display(), d.message));
        let text = to_source(&imported.program).unwrap_or_else(|d| panic!("{}: {}", m.display(), d.message));
        assert!(text.lines().count() > imported.program.graphs[0].body.len(), "{}", m.display());
    }
}
