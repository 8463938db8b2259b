variable "repositories" {
  description = "Repository names: one per worker image."
  type        = list(string)
  default     = ["mdf-worker-cpu", "mdf-worker-gpu"]
}

variable "kms_key_arn" {
  description = "KMS key that encrypts the images."
  type        = string
}

variable "force_delete" {
  description = "Allow `terraform destroy` to delete repositories that still hold images."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
