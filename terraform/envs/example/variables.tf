variable "region" {
  description = "AWS region (us-east-1 is where CommonCrawl's bucket lives: no cross-region transfer)."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Name prefix of every resource."
  type        = string
  default     = "mdf"
}

variable "bucket_name" {
  description = "Globally unique bucket name for jobs and outputs."
  type        = string
}

variable "vpc_id" {
  description = "VPC for the workers."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets (with a NAT gateway or S3/ECR/Logs endpoints) for the workers."
  type        = list(string)
}

variable "image_tag" {
  description = "Tag of the worker images pushed to the registries."
  type        = string
  default     = "v0.1.0"
}

variable "cpu_max_vcpus" {
  description = "Most vCPUs of CPU Spot workers."
  type        = number
  default     = 1024
}

variable "gpu_max_vcpus" {
  description = "Most vCPUs of GPU Spot workers (0 keeps the GPU environment idle)."
  type        = number
  default     = 64
}

variable "tags" {
  description = "Tags on every resource."
  type        = map(string)
  default = {
    project = "mdf"
  }
}

variable "route_table_ids" {
  description = "Route tables of subnet_ids: an S3 gateway endpoint is added to them, so S3 traffic skips the NAT gateway (which charges per GB). Empty: no endpoint."
  type        = list(string)
  default     = []
}

variable "fleet_max_instances" {
  description = "Most instances of the CPU spot fleet (0: no fleets, Batch only)."
  type        = number
  default     = 64
}

variable "fleet_max_gpu_instances" {
  description = "Most instances of the GPU spot fleet."
  type        = number
  default     = 8
}
