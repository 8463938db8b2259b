# AWS Batch on EC2 Spot: one compute environment, job queue and job definition per
# worker class (CPU, GPU). Job definitions come from manifests/batch/*.json (the files
# CI validates against the Batch API model), with this deployment's image, roles and
# log group filled in. Workers are interruptible by design: a reclaimed instance's
# leases expire and other workers take the tasks over.

locals {
  definitions = {
    cpu = jsondecode(file("${path.module}/../../../manifests/batch/job-definition-cpu.json"))
    gpu = jsondecode(file("${path.module}/../../../manifests/batch/job-definition-gpu.json"))
  }
  environments = {
    cpu = {
      instance_types = var.cpu_instance_types
      max_vcpus      = var.cpu_max_vcpus
      image_type     = "ECS_AL2023"
    }
    gpu = {
      instance_types = var.gpu_instance_types
      max_vcpus      = var.gpu_max_vcpus
      image_type     = "ECS_AL2023_NVIDIA"
    }
  }
}

data "aws_region" "current" {}

resource "aws_cloudwatch_log_group" "workers" {
  name              = "/aws/batch/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

# Workers only call out: S3, ECR, CloudWatch Logs and the input buckets over HTTPS.
resource "aws_security_group" "workers" {
  name        = "${var.name}-workers"
  description = "mdf workers: outbound HTTPS only"
  vpc_id      = var.vpc_id
  tags        = var.tags

  egress {
    description = "HTTPS to AWS APIs and input buckets"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_launch_template" "workers" {
  name                   = "${var.name}-workers"
  update_default_version = true
  tags                   = var.tags

  # IMDSv2 only, one hop: containers get the job role from the ECS agent, never the
  # instance role from the metadata service.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  block_device_mappings {
    device_name = "/dev/xvda"
    ebs {
      volume_size           = var.root_volume_gib
      volume_type           = "gp3"
      encrypted             = true
      kms_key_id            = var.kms_key_arn
      delete_on_termination = true
    }
  }
}

resource "aws_batch_compute_environment" "workers" {
  for_each                 = local.environments
  compute_environment_name = "${var.name}-${each.key}-spot"
  type                     = "MANAGED"
  service_role             = var.service_role_arn
  tags                     = var.tags

  compute_resources {
    type                = "SPOT"
    allocation_strategy = var.spot_allocation_strategy
    bid_percentage      = var.spot_bid_percentage
    min_vcpus           = 0
    max_vcpus           = each.value.max_vcpus
    instance_type       = each.value.instance_types
    instance_role       = var.instance_profile_arn
    subnets             = var.subnet_ids
    security_group_ids  = [aws_security_group.workers.id]

    ec2_configuration {
      image_type = each.value.image_type
    }

    launch_template {
      launch_template_id = aws_launch_template.workers.id
      version            = aws_launch_template.workers.latest_version
    }
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_batch_job_queue" "workers" {
  for_each = local.environments
  name     = "${var.name}-${each.key}"
  state    = "ENABLED"
  priority = 1
  tags     = var.tags

  compute_environment_order {
    order               = 1
    compute_environment = aws_batch_compute_environment.workers[each.key].arn
  }
}

resource "aws_batch_job_definition" "worker" {
  for_each              = local.definitions
  name                  = each.value.jobDefinitionName
  type                  = each.value.type
  platform_capabilities = each.value.platformCapabilities
  parameters            = each.value.parameters
  propagate_tags        = each.value.propagateTags
  tags                  = merge(var.tags, each.value.tags)

  container_properties = jsonencode(merge(each.value.containerProperties, {
    image            = "${var.repository_urls[each.key]}:${var.image_tag}"
    jobRoleArn       = var.job_role_arn
    executionRoleArn = var.execution_role_arn
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        "awslogs-group"         = aws_cloudwatch_log_group.workers.name
        "awslogs-region"        = data.aws_region.current.id
        "awslogs-stream-prefix" = "mdf-${each.key}"
      }
    }
  }))

  retry_strategy {
    attempts = each.value.retryStrategy.attempts
    dynamic "evaluate_on_exit" {
      for_each = each.value.retryStrategy.evaluateOnExit
      content {
        action           = lower(evaluate_on_exit.value.action)
        on_status_reason = lookup(evaluate_on_exit.value, "onStatusReason", null)
        on_reason        = lookup(evaluate_on_exit.value, "onReason", null)
        on_exit_code     = lookup(evaluate_on_exit.value, "onExitCode", null)
      }
    }
  }

  timeout {
    attempt_duration_seconds = each.value.timeout.attemptDurationSeconds
  }
}
