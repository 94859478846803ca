//! Bucket notification rules (Put/GetBucketNotificationConfiguration): S3's document converted to
//! and from the store's rules (`isthmus_store::notification`). A rule's destination must be one
//! the operator configured (`[[notify_webhook]]`, ...), named by its ARN; the credentials stay
//! in the configuration file and never pass through this API.

use isthmus_store::BucketSettings;
use isthmus_store::notification::{NotificationConfig, NotificationRule, RuleList};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};
use sha2::Digest;

use crate::Gateway;

pub async fn put_bucket_notification_configuration(
    gw: &Gateway,
    req: S3Request<PutBucketNotificationConfigurationInput>,
) -> S3Result<S3Response<PutBucketNotificationConfigurationOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let rules = rules_of(input.notification_configuration, gw.notification_destinations())?;
    // An empty configuration turns notifications off, as in S3.
    let config = (!rules.is_empty()).then_some(NotificationConfig { rules });
    gw.write(&cx, move |store, cx| store.set_bucket_notification(cx, &input.bucket, config.clone())).await?;
    Ok(S3Response::new(PutBucketNotificationConfigurationOutput::default()))
}

/// A bucket without rules answers an empty configuration, as in S3.
pub async fn get_bucket_notification_configuration(
    gw: &Gateway,
    req: S3Request<GetBucketNotificationConfigurationInput>,
) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let config = gw.read(&cx, move |store, cx| store.bucket_notification(cx, &bucket)).await?.unwrap_or_default();
    Ok(S3Response::new(document_of(config)))
}

/// The rules of an S3 document, each destination checked against `destinations` (the ARNs the
/// operator configured).
fn rules_of(document: NotificationConfiguration, destinations: &[String]) -> S3Result<Vec<NotificationRule>> {
    if document.event_bridge_configuration.is_some() {
        return Err(s3_error!(
            NotImplemented,
            "EventBridge is not a destination Isthmus sends to: name an operator's destination by its ARN"
        ));
    }
    let mut rules = Vec::new();
    for queue in document.queue_configurations.unwrap_or_default() {
        rules.push(rule_of(RuleList::Queue, queue.id, queue.queue_arn, queue.events, queue.filter, destinations)?);
    }
    for topic in document.topic_configurations.unwrap_or_default() {
        rules.push(rule_of(RuleList::Topic, topic.id, topic.topic_arn, topic.events, topic.filter, destinations)?);
    }
    for lambda in document.lambda_function_configurations.unwrap_or_default() {
        rules.push(rule_of(
            RuleList::LambdaFunction,
            lambda.id,
            lambda.lambda_function_arn,
            lambda.events,
            lambda.filter,
            destinations,
        )?);
    }
    Ok(rules)
}

fn rule_of(
    list: RuleList,
    id: Option<String>,
    arn: String,
    events: Vec<Event>,
    filter: Option<NotificationConfigurationFilter>,
    destinations: &[String],
) -> S3Result<NotificationRule> {
    if !destinations.contains(&arn) {
        return Err(s3_error!(
            InvalidArgument,
            "A specified destination ARN does not exist or is not well-formed: {arn:?} (the operator's destinations are named arn:isthmus:sqs::ID:KIND; configured: {})",
            if destinations.is_empty() { "none".to_string() } else { destinations.join(", ") }
        ));
    }
    let (mut prefix, mut suffix) = (None, None);
    for filter_rule in filter.and_then(|f| f.key).and_then(|k| k.filter_rules).unwrap_or_default() {
        let name = filter_rule.name.as_ref().map(|n| n.as_str().to_ascii_lowercase()).unwrap_or_default();
        let slot = match name.as_str() {
            "prefix" => &mut prefix,
            "suffix" => &mut suffix,
            other => {
                return Err(s3_error!(
                    InvalidArgument,
                    "filter rule name must be either prefix or suffix, not {other:?}"
                ));
            }
        };
        if slot.replace(filter_rule.value.unwrap_or_default()).is_some() {
            return Err(s3_error!(InvalidArgument, "Cannot specify more than one {name} rule in a filter."));
        }
    }
    let events: Vec<String> = events.into_iter().map(String::from).collect();
    let mut rule = NotificationRule {
        id: id.unwrap_or_default(),
        list,
        arn,
        events,
        prefix: prefix.unwrap_or_default(),
        suffix: suffix.unwrap_or_default(),
    };
    if rule.id.is_empty() {
        // S3 makes an id up for a rule without one; this one is the same for the same rule.
        let text = format!("{:?}|{}|{:?}|{}|{}", rule.list, rule.arn, rule.events, rule.prefix, rule.suffix);
        rule.id = hex::encode(&sha2::Sha256::digest(text.as_bytes())[..9]);
    }
    Ok(rule)
}

fn document_of(config: NotificationConfig) -> GetBucketNotificationConfigurationOutput {
    let (mut queues, mut topics, mut lambdas) = (Vec::new(), Vec::new(), Vec::new());
    for rule in config.rules {
        let filter = filter_of(&rule);
        let events = rule.events.into_iter().map(Event::from).collect();
        let id = Some(rule.id);
        match rule.list {
            RuleList::Queue => queues.push(QueueConfiguration { events, filter, id, queue_arn: rule.arn }),
            RuleList::Topic => topics.push(TopicConfiguration { events, filter, id, topic_arn: rule.arn }),
            RuleList::LambdaFunction => {
                lambdas.push(LambdaFunctionConfiguration { events, filter, id, lambda_function_arn: rule.arn })
            }
        }
    }
    GetBucketNotificationConfigurationOutput {
        event_bridge_configuration: None,
        lambda_function_configurations: some(lambdas),
        queue_configurations: some(queues),
        topic_configurations: some(topics),
    }
}

fn filter_of(rule: &NotificationRule) -> Option<NotificationConfigurationFilter> {
    let mut rules = Vec::new();
    // Named as S3 answers them ("Prefix", "Suffix"); any case is accepted on the way in.
    for (name, value) in [("Prefix", &rule.prefix), ("Suffix", &rule.suffix)] {
        if !value.is_empty() {
            rules.push(FilterRule { name: Some(FilterRuleName::from_static(name)), value: Some(value.clone()) });
        }
    }
    some(rules).map(|rules| NotificationConfigurationFilter { key: Some(S3KeyFilter { filter_rules: Some(rules) }) })
}

/// A list, or `None` when empty (S3's documents leave empty lists out).
fn some<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}
