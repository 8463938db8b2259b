variable "name" {
  description = "Name prefix of the compute environments, queues and log group."
  type        = string
  default     = "mdf"
}

variable "vpc_id" {
  description = "VPC of the compute environments."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets for the instances (private subnets with a NAT or S3/ECR endpoints)."
  type        = list(string)
}

variable "cpu_instance_types" {
  description = "Instance families or types for CPU workers (Spot picks among them)."
  type        = list(string)
  default     = ["c7i", "c6i", "c7a", "c6a", "m7i", "m6i"]
}

variable "gpu_instance_types" {
  description = "Instance types for GPU workers."
  type        = list(string)
  default     = ["g5.2xlarge", "g5.4xlarge", "g6.2xlarge", "g6.4xlarge"]
}

variable "cpu_max_vcpus" {
  description = "Most vCPUs the CPU compute environment scales to."
  type        = number
  default     = 2048
}

variable "gpu_max_vcpus" {
  description = "Most vCPUs the GPU compute environment scales to."
  type        = number
  default     = 256
}

variable "spot_allocation_strategy" {
  description = "How Spot capacity is chosen: SPOT_PRICE_CAPACITY_OPTIMIZED or SPOT_CAPACITY_OPTIMIZED."
  type        = string
  default     = "SPOT_PRICE_CAPACITY_OPTIMIZED"
  validation {
    condition     = contains(["SPOT_PRICE_CAPACITY_OPTIMIZED", "SPOT_CAPACITY_OPTIMIZED", "BEST_FIT_PROGRESSIVE"], var.spot_allocation_strategy)
    error_message = "spot_allocation_strategy must be SPOT_PRICE_CAPACITY_OPTIMIZED, SPOT_CAPACITY_OPTIMIZED or BEST_FIT_PROGRESSIVE."
  }
}

variable "spot_bid_percentage" {
  description = "Highest Spot price as a percentage of On-Demand."
  type        = number
  default     = 100
}

variable "root_volume_gib" {
  description = "Root EBS volume per instance: images, and dedup spill files (TMPDIR)."
  type        = number
  default     = 200
}

variable "service_role_arn" {
  description = "AWS Batch service role."
  type        = string
}

variable "instance_profile_arn" {
  description = "Instance profile of the compute environments."
  type        = string
}

variable "job_role_arn" {
  description = "Role the worker containers run as."
  type        = string
}

variable "execution_role_arn" {
  description = "Task execution role (image pulls, logs)."
  type        = string
}

variable "repository_urls" {
  description = "Worker image repository URL by class: {cpu = ..., gpu = ...}."
  type        = map(string)
}

variable "image_tag" {
  description = "Worker image tag to run (tags are immutable)."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key for the log group and the instances' volumes."
  type        = string
}

variable "log_retention_days" {
  description = "Days the workers' logs are kept."
  type        = number
  default     = 365
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
