# One complete mdf deployment: bucket, registries, roles, AWS Batch Spot environments
# for CPU and GPU workers, and two spot fleets (Auto Scaling groups, CPU and GPU) that
# can feed the same job. docs/DEPLOY.md walks through apply, image push, submit, watch
# and destroy, and when to pick Batch, a fleet or Kubernetes.

module "storage" {
  source      = "../../modules/storage"
  bucket_name = var.bucket_name
  jobs_prefix = "mdf/jobs/"
  # The fleets' encrypted root volumes are launched by Auto Scaling's service-linked
  # role (create it once per account: aws iam create-service-linked-role
  # --aws-service-name autoscaling.amazonaws.com).
  ebs_launcher_role_arns = var.fleet_max_instances > 0 ? [
    "arn:aws:iam::${data.aws_caller_identity.current.account_id}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
  ] : []
  tags = var.tags
}

module "registry" {
  source       = "../../modules/registry"
  repositories = ["${var.name}-worker-cpu", "${var.name}-worker-gpu"]
  kms_key_arn  = module.storage.kms_key_arn
  tags         = var.tags
}

module "iam" {
  source            = "../../modules/iam"
  name              = var.name
  bucket_arn        = module.storage.bucket_arn
  kms_key_arn       = module.storage.kms_key_arn
  writable_prefixes = ["mdf/", "clean/"]
  repository_arns   = values(module.registry.repository_arns)
  log_group_arn     = "arn:aws:logs:${var.region}:${data.aws_caller_identity.current.account_id}:log-group:/aws/batch/${var.name}"
  tags              = var.tags
}

data "aws_caller_identity" "current" {}

module "batch" {
  source               = "../../modules/batch"
  name                 = var.name
  vpc_id               = var.vpc_id
  subnet_ids           = var.subnet_ids
  cpu_max_vcpus        = var.cpu_max_vcpus
  gpu_max_vcpus        = var.gpu_max_vcpus
  service_role_arn     = module.iam.batch_service_role_arn
  instance_profile_arn = module.iam.instance_profile_arn
  job_role_arn         = module.iam.job_role_arn
  execution_role_arn   = module.iam.execution_role_arn
  kms_key_arn          = module.storage.kms_key_arn
  image_tag            = var.image_tag
  repository_urls = {
    cpu = module.registry.repository_urls["${var.name}-worker-cpu"]
    gpu = module.registry.repository_urls["${var.name}-worker-gpu"]
  }
  tags = var.tags
}

# Spot fleets: `mdf submit --backend fleet --workers N` (CPU) and `--gpu-workers M` tag
# these groups with the job and scale them; they scale back to zero by themselves.
module "fleet" {
  source   = "../../modules/fleet"
  for_each = var.fleet_max_instances > 0 ? local.fleets : {}

  name                 = "${var.name}-${each.key}"
  class                = each.key
  image                = "${module.registry.repository_urls["${var.name}-worker-${each.key}"]}:${var.image_tag}"
  instance_types       = each.value.instance_types
  max_size             = each.value.max_size
  subnet_ids           = var.subnet_ids
  vpc_id               = var.vpc_id
  instance_profile_arn = module.iam.fleet_instance_profile_arn
  kms_key_arn          = module.storage.kms_key_arn
  environment          = { MDF_LOG_FORMAT = "json" }
  tags                 = var.tags
}

locals {
  fleets = {
    cpu = {
      instance_types = ["c7i.4xlarge", "c6i.4xlarge", "c7a.4xlarge", "c6a.4xlarge", "m7i.4xlarge", "m6i.4xlarge"]
      max_size       = var.fleet_max_instances
    }
    gpu = {
      instance_types = ["g5.2xlarge", "g6.2xlarge", "g5.4xlarge", "g6.4xlarge"]
      max_size       = var.fleet_max_gpu_instances
    }
  }
}

# S3 through a gateway endpoint: free, and no NAT data-processing charge on the
# terabytes a CommonCrawl job reads.
data "aws_vpc_endpoint_service" "s3" {
  service      = "s3"
  service_type = "Gateway"
}

resource "aws_vpc_endpoint" "s3" {
  count             = length(var.route_table_ids) > 0 ? 1 : 0
  vpc_id            = var.vpc_id
  service_name      = data.aws_vpc_endpoint_service.s3.service_name
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.route_table_ids
  tags              = var.tags
}
