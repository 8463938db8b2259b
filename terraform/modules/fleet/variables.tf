variable "name" {
  description = "Name of the Auto Scaling group (mdf submit --backend fleet --group NAME), its launch template and log group; starts with the iam module's name and a dash (its instance role may only terminate instances of such groups)."
  type        = string
}

variable "class" {
  description = "Worker class: cpu or gpu (mdf worker --resources)."
  type        = string
  default     = "cpu"
  validation {
    condition     = contains(["cpu", "gpu"], var.class)
    error_message = "class must be cpu or gpu."
  }
}

variable "image" {
  description = "The worker image with its tag (manifests/docker/Dockerfile.cpu or .gpu, pushed to the registry module's repository)."
  type        = string
}

variable "instance_types" {
  description = "Instance types the group may launch (the mixed-instances policy picks the cheapest spot capacity among them); list several in one size class."
  type        = list(string)
  validation {
    condition     = length(var.instance_types) > 0
    error_message = "instance_types needs at least one instance type."
  }
}

variable "max_size" {
  description = "Most instances the group runs (mdf submit --workers is capped to it)."
  type        = number
  default     = 100
}

variable "on_demand_base_capacity" {
  description = "Instances that are On-Demand before any spot capacity is used (0: all spot)."
  type        = number
  default     = 0
}

variable "on_demand_percentage_above_base" {
  description = "Percentage of the capacity above the base that is On-Demand (0: all spot)."
  type        = number
  default     = 0
}

variable "ami_id" {
  description = "AMI with Docker (and, for gpu, NVIDIA drivers and the container toolkit); empty: the latest ECS-optimized Amazon Linux 2023 AMI of the class."
  type        = string
  default     = ""
}

variable "subnet_ids" {
  description = "Private subnets (a NAT gateway or S3/ECR/Logs/Auto Scaling endpoints); spread over zones for spot capacity."
  type        = list(string)
}

variable "vpc_id" {
  description = "VPC of subnet_ids."
  type        = string
}

variable "instance_profile_arn" {
  description = "Instance profile the workers run as (the iam module's fleet_instance_profile_arn): the job's bucket prefixes, the inputs, and leaving this group."
  type        = string
}

variable "kms_key_arn" {
  description = "KMS key for the root volumes and the log group."
  type        = string
}

variable "root_volume_gib" {
  description = "Root EBS volume per instance: the image, and dedup spill files (TMPDIR)."
  type        = number
  default     = 200
}

variable "environment" {
  description = "Extra environment variables of the worker (for example MDF_LOG_FORMAT = json, RUST_LOG)."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for k, v in var.environment : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k)) && !strcontains(v, "'")])
    error_message = "environment: names are shell variable names, and values carry no single quote."
  }
}

variable "cpu_work" {
  description = "gpu class only: the GPU workers also take CPU tasks when no GPU task is ready."
  type        = bool
  default     = false
}

variable "log_retention_days" {
  description = "Days the worker logs are kept."
  type        = number
  default     = 365
}

variable "tags" {
  description = "Tags for every resource (and the instances)."
  type        = map(string)
  default     = {}
}
