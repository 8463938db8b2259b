# mdf workers on an EC2 Auto Scaling group of spot instances: no scheduler, no queue.
# `mdf submit --backend fleet --group NAME` tags the group with a job (mdf-job = the job
# URI, propagated to the instances it launches) and sets its desired capacity; every
# instance runs `mdf worker --fleet-group NAME` in the worker image, which works on the
# tagged job and, when there is no job left for it, terminates its own instance with
# the desired capacity decremented, so the group scales itself back to zero. A spot
# interruption notice makes the worker stop leasing and hand its task back in time.

locals {
  ami_parameter = {
    cpu = "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id"
    gpu = "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
  }
  log_group = "/mdf/fleet/${var.name}"
  user_data = templatefile("${path.module}/user-data.sh.tftpl", {
    group       = var.name
    class       = var.class
    image       = var.image
    log_group   = local.log_group
    cpu_work    = var.cpu_work && var.class == "gpu"
    environment = var.environment
  })
}

# The latest ECS-optimized Amazon Linux 2023 AMI: Docker, the AWS CLI and, for GPU
# instances, NVIDIA's drivers and container toolkit.
data "aws_ssm_parameter" "ami" {
  count = var.ami_id == "" ? 1 : 0
  name  = local.ami_parameter[var.class]
}

resource "aws_cloudwatch_log_group" "workers" {
  name              = local.log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

# Workers only call out: S3, ECR, CloudWatch Logs, Auto Scaling over HTTPS (the
# instance metadata service is link-local and needs no rule).
resource "aws_security_group" "workers" {
  name        = "${var.name}-workers"
  description = "mdf fleet workers: outbound HTTPS only"
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
  name                                 = "${var.name}-worker"
  image_id                             = var.ami_id != "" ? var.ami_id : data.aws_ssm_parameter.ami[0].insecure_value
  update_default_version               = true
  instance_initiated_shutdown_behavior = "terminate"
  user_data                            = base64encode(local.user_data)
  tags                                 = var.tags

  iam_instance_profile {
    arn = var.instance_profile_arn
  }

  # IMDSv2 only, one hop (the worker container uses the host network): the worker
  # reads its instance id, region and spot notices here, and its group's job from the
  # Auto Scaling API.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  monitoring {
    enabled = true
  }

  network_interfaces {
    associate_public_ip_address = false
    delete_on_termination       = true
    security_groups             = [aws_security_group.workers.id]
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

  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = "${var.name}-worker" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = var.tags
  }
}

resource "aws_autoscaling_group" "workers" {
  name                = var.name
  min_size            = 0
  max_size            = var.max_size
  desired_capacity    = 0
  vpc_zone_identifier = var.subnet_ids
  # The worker owns rebalancing: on a rebalance recommendation it finishes its task and
  # terminates its instance without decrementing, so the group replaces it. With
  # Capacity Rebalancing on as well, Auto Scaling would terminate the instance as soon
  # as a replacement is healthy, running task or not.
  capacity_rebalance = false
  health_check_type  = "EC2"
  # Never terminate busy instances to even out zones: spot capacity is rarely even.
  suspended_processes = ["AZRebalance"]

  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = var.on_demand_base_capacity
      on_demand_percentage_above_base_capacity = var.on_demand_percentage_above_base
      spot_allocation_strategy                 = "price-capacity-optimized"
    }

    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.workers.id
        version            = "$Latest"
      }

      dynamic "override" {
        for_each = var.instance_types
        content {
          instance_type = override.value
        }
      }
    }
  }

  dynamic "tag" {
    for_each = merge(var.tags, { "mdf-fleet" = var.name })
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  # mdf submit owns the desired capacity and the mdf-job tag; Terraform must not undo
  # them on the next apply (tags given here apply when the group is created).
  lifecycle {
    ignore_changes = [desired_capacity, tag]
  }
}
