variable "bucket_name" {
  description = "Name of the bucket that holds jobs (manifests, leases, shuffle data) and outputs."
  type        = string
}

variable "jobs_prefix" {
  description = "Prefix under which `mdf submit --job-root` writes jobs (intermediate data)."
  type        = string
  default     = "mdf/jobs/"
}

variable "intermediate_expiry_days" {
  description = "Days after which job data under jobs_prefix (leases, staging, shuffle objects) expires. Outputs are elsewhere and never expire."
  type        = number
  default     = 30
}

variable "kms_key_deletion_window_days" {
  description = "Waiting period before the bucket's KMS key is deleted."
  type        = number
  default     = 30
}

variable "force_destroy" {
  description = "Allow `terraform destroy` to delete a non-empty bucket (example environments only)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}

variable "access_log_bucket" {
  description = "Existing bucket for S3 server access logs; empty: no access logging."
  type        = string
  default     = ""
}

variable "ebs_launcher_role_arns" {
  description = "Roles that launch instances with EBS volumes encrypted by the bucket key: the Auto Scaling service-linked role (arn:aws:iam::ACCOUNT:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling) when the fleet module is used. The role must exist (aws iam create-service-linked-role --aws-service-name autoscaling.amazonaws.com)."
  type        = list(string)
  default     = []
}
