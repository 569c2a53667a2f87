-- The start of the last answer's body, at most 1 KiB (WebhookDeliverer.logExcerpt).
ALTER TABLE webhook_deliveries ADD COLUMN last_response text;
