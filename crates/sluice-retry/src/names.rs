//! Topic and group names of the retry tiers and the dead-letter topic.

use crate::tiers::Tier;

/// The retry topic of `topic` for `tier`: `<topic>.retry.<tier label>`.
pub fn retry_topic(topic: &str, tier: &Tier) -> String {
    format!("{topic}.retry.{}", tier.label())
}

/// The dead-letter topic of `topic`: `<topic>.dlt`.
pub fn dlt_topic(topic: &str) -> String {
    format!("{topic}.dlt")
}

/// The consumer group of `tier` for the main consumer's `group`: `<group>.retry.<label>`.
pub fn tier_group(group: &str, tier: &Tier) -> String {
    format!("{group}.retry.{}", tier.label())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tiers;

    #[test]
    fn names_follow_the_topic_and_the_tier_label() {
        let tiers = Tiers::parse("30s,2m").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(retry_topic("mail", &tiers.as_slice()[0]), "mail.retry.30s");
        assert_eq!(retry_topic("mail", &tiers.as_slice()[1]), "mail.retry.2m");
        assert_eq!(
            tier_group("mailbox", &tiers.as_slice()[1]),
            "mailbox.retry.2m"
        );
        assert_eq!(dlt_topic("mail"), "mail.dlt");
    }
}
