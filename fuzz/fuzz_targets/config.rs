//! The configuration loader: the text of a TOML configuration file, as `load` reads it
//! (`config::apply_file`), then `Config::validate`. Any text gives a configuration or
//! problems, never a panic. A configuration without problems, printed by `--print-config`
//! (`Loaded::to_toml`), loads back as the same configuration.
//!
//! The first line is also given to one option (chosen by the first byte) as an `AUTOPREP_*`
//! variable's or a flag's text.
#![no_main]

use autoprep::config::options::{Kind, Raw, OPTIONS};
use autoprep::config::{apply_file, Config, Loaded, Source};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    let mut config = Config::default();
    let mut problems = Vec::new();
    let keys = apply_file(&mut config, path, text, &mut problems);
    let invalid = config.validate();
    for p in &invalid {
        assert!(!p.message.is_empty());
    }

    if problems.is_empty() && invalid.is_empty() {
        let loaded = Loaded {
            config: config.clone(),
            print_config: true,
            file: Some(PathBuf::from(path)),
            sources: keys
                .iter()
                .map(|k| (*k, Source::File(PathBuf::from(path))))
                .collect::<BTreeMap<_, _>>(),
            warnings: Vec::new(),
        };
        let printed = loaded.to_toml();
        let mut again = Config::default();
        let mut problems = Vec::new();
        apply_file(&mut again, path, &printed, &mut problems);
        assert_eq!(
            problems,
            Vec::<String>::new(),
            "--print-config output:\n{printed}"
        );
        assert_eq!(again, config, "--print-config output:\n{printed}");
    }

    // One option given as text, as a variable or a flag gives it.
    if let Some((&first, _)) = data.split_first() {
        let o = &OPTIONS[usize::from(first) % OPTIONS.len()];
        let line = text.lines().next().unwrap_or_default();
        let raw = match o.kind {
            Kind::One => Raw::Text(line),
            Kind::List => Raw::Texts(autoprep::config::options::split_list(line)),
        };
        let mut c = Config::default();
        if (o.set)(&mut c, &raw).is_ok() {
            let _ = c.validate();
        }
    }
});
