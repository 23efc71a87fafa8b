//! Discovers the migrations: every `<NNNN>_<description>.sql` of the workspace's
//! `migrations/` (sluice's own tables) and `deploy/seeds/migrations/` (the seed system's),
//! embedded in order (`migrate::MIGRATIONS`), each with the set it belongs to. The two sets
//! share one numbering: a file that does not follow the pattern, or a gap or a repeat in the
//! numbers, fails the build.

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The folders, each with the `Set` variant its files belong to.
const FOLDERS: [(&str, &str); 2] = [
    ("../../migrations", "Set::Own"),
    ("../../deploy/seeds/migrations", "Set::Seeds"),
];

fn main() -> Result<(), Box<dyn Error>> {
    // The manifest directory of this build, read when the script runs (`env!` would bake in
    // wherever the script was first compiled, wrong for a moved or copied target directory).
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let mut files: Vec<(i64, String, PathBuf, &str)> = Vec::new();
    for (folder, set) in FOLDERS {
        let dir = manifest.join(folder);
        println!("cargo::rerun-if-changed={}", dir.display());
        for entry in std::fs::read_dir(&dir)? {
            let name = entry?
                .file_name()
                .into_string()
                .map_err(|n| format!("{n:?}"))?;
            if !name.ends_with(".sql") {
                continue;
            }
            let version = name
                .split_once('_')
                .filter(|(number, _)| number.len() == 4)
                .and_then(|(number, _)| number.parse::<i64>().ok())
                .ok_or_else(|| format!("{folder}/{name}: expected <NNNN>_<description>.sql"))?;
            files.push((version, name.clone(), dir.join(&name), set));
        }
    }
    files.sort();
    let mut list = String::from("&[\n");
    for (i, (version, name, path, set)) in files.iter().enumerate() {
        let expected = i64::try_from(i)? + 1;
        if *version != expected {
            return Err(format!("{}: expected version {expected:04}", path.display()).into());
        }
        writeln!(
            list,
            "    Migration {{ version: {version}, name: {name:?}, set: {set}, sql: include_str!({:?}) }},",
            path.display().to_string()
        )?;
    }
    list.push(']');
    let out = Path::new(&std::env::var("OUT_DIR")?).join("migrations.rs");
    std::fs::write(out, list)?;
    Ok(())
}
