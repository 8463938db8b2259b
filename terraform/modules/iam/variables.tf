variable "name" {
  description = "Name prefix of the roles."
  type        = string
  default     = "mdf"
}

variable "bucket_arn" {
  description = "ARN of the mdf bucket."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key of the bucket (and of the images and logs)."
  type        = string
}

variable "writable_prefixes" {
  description = "Prefixes of the bucket that workers read and write: the job root and the outputs."
  type        = list(string)
  default     = ["mdf/", "clean/"]
}

variable "readable_object_arns" {
  description = "Other objects workers only read, as ARNs with wildcards (inputs such as arn:aws:s3:::commoncrawl/crawl-data/*)."
  type        = list(string)
  default     = ["arn:aws:s3:::commoncrawl/crawl-data/*"]
}

variable "readable_bucket_arns" {
  description = "Buckets of readable_object_arns, for listing inputs."
  type        = list(string)
  default     = ["arn:aws:s3:::commoncrawl"]
}

variable "repository_arns" {
  description = "ECR repositories the execution role pulls from."
  type        = list(string)
}

variable "log_group_arn" {
  description = "CloudWatch log group the containers write to."
  type        = string
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
