//! Review texts from empty to a few thousand characters, with non-ASCII words.

use rand::Rng;

const WORDS: &[&str] = &[
    "great",
    "app",
    "crashes",
    "after",
    "update",
    "love",
    "it",
    "battery",
    "drain",
    "ads",
    "too",
    "many",
    "works",
    "fine",
    "on",
    "my",
    "phone",
    "please",
    "fix",
    "login",
    "slow",
    "نرم‌افزار",
    "عالی",
    "است",
    "خیلی",
    "کند",
    "nagyon",
    "jó",
    "alkalmazás",
    "lassú",
    "hiba",
    "très",
    "bien",
    "schön",
    "día",
    "👍",
    "🔥",
    "😡",
    "★★★★★",
    "naïve",
    "café",
    "Zürich",
];

/// A review text: about a tenth are empty, most are short, a few run to thousands of chars.
pub fn review_text<R: Rng>(rng: &mut R) -> String {
    let words = match rng.random_range(0..100) {
        0..10 => 0,
        10..80 => rng.random_range(3..40),
        80..97 => rng.random_range(40..300),
        _ => rng.random_range(300..700),
    };
    let mut text = String::new();
    for i in 0..words {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text
}

/// A user name, sometimes non-ASCII.
pub fn user_name<R: Rng>(rng: &mut R) -> String {
    const NAMES: &[&str] = &[
        "Anna", "Bence", "Sara", "Reza", "Mariam", "Zoltán", "Léa", "Jörg",
    ];
    format!(
        "{} {}",
        NAMES[rng.random_range(0..NAMES.len())],
        rng.random_range(1..10_000)
    )
}
