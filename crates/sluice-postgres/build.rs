//! Discovers the migrations: every `migrations/<NNNN>_<description>.sql` of the workspace,
//! embedded in order (`migrate::MIGRATIONS`). A file that does not follow the pattern, or a
//! gap or a repeat in the numbers, fails the build.

use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;

fn main() -> Result<(), Box<dyn Error>> {
    // The manifest directory of this build, read when the script runs (`env!` would bake in
    // wherever the script was first compiled, wrong for a moved or copied target directory).
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR")?).join("../../migrations");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<(i64, String)> = Vec::new();
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
            .ok_or_else(|| format!("migrations/{name}: expected <NNNN>_<description>.sql"))?;
        files.push((version, name));
    }
    files.sort();
    let mut list = String::from("&[\n");
    for (i, (version, name)) in files.iter().enumerate() {
        let expected = i64::try_from(i)? + 1;
        if *version != expected {
            return Err(format!("migrations/{name}: expected version {expected:04}").into());
        }
        let path = dir.join(name);
        writeln!(
            list,
            "    Migration {{ version: {version}, name: {name:?}, sql: include_str!({:?}) }},",
            path.display().to_string()
        )?;
    }
    list.push(']');
    let out = Path::new(&std::env::var("OUT_DIR")?).join("migrations.rs");
    std::fs::write(out, list)?;
    Ok(())
}
